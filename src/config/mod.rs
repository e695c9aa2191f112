//! Runtime configuration files: YAML parsed with positions into JSON values, then `${VAR}`
//! expansion applied to the parsed strings (never to the raw text).

mod diagnose;
mod expand;
mod yaml;

pub use expand::expand;
pub use yaml::{Positions, load_yaml, load_yaml_with_positions};

mod model;
pub use model::{
    AuditConfig, Config, ContextConfig, EMBEDDED, Environment, HttpConfig, LimitsConfig,
    McpServerEntry, StateConfig, StdioConfig, WorkspaceConfig,
};

use std::path::{Path, PathBuf};

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or holds something JSON cannot (a non-string key, `.inf`, a tag).
    #[error("{origin}:{line}:{col}: {message}")]
    Yaml {
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        message: String,
    },
    /// `${VAR}` names a variable that is not set.
    #[error("{path}: environment variable {var} is not set")]
    Unset { var: String, path: String },
    /// `${VAR:?message}` / `${VAR?message}` with the variable unset (or empty for `:?`).
    #[error("{path}: environment variable {var}: {message}")]
    Required {
        var: String,
        path: String,
        message: String,
    },
    /// A malformed `${…}` expression.
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    /// A key or value that does not fit the configuration (unknown key, wrong type, missing
    /// key), rendered like rustc: `file:line:col`, the line, a caret and a help line.
    #[error("{rendered}")]
    Invalid {
        /// `file:line:col`.
        location: String,
        /// The whole diagnostic.
        rendered: String,
    },
}

/// Reads `path`, parses it with [`load_yaml`] and expands variables from the process environment.
pub fn load_file(path: &Path) -> Result<serde_json::Value, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut value = load_yaml(&text, &path.display().to_string())?;
    expand(&mut value, &|name| std::env::var(name).ok())?;
    Ok(value)
}
