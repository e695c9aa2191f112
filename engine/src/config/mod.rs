//! Runtime configuration files: YAML parsed with positions into JSON values, then `${VAR}`
//! expansion applied to the parsed strings (never to the raw text).

mod diagnose;
pub mod env;
mod expand;
mod yaml;

pub use env::{egress_proxy, lookup as env_lookup};
pub use expand::expand;
pub use yaml::{Positions, load_yaml, load_yaml_with_positions};

mod model;
pub use model::{
    AuditConfig, Config, ContextConfig, EMBEDDED, Environment, HttpConfig, LimitsConfig,
    McpServerEntry, RateLimitsConfig, StateConfig, StdioConfig, TelemetryConfig, WorkspaceConfig,
};

use std::path::{Path, PathBuf};

/// Where the JSON Schema of `config.yaml` is kept (for editors; `config.yaml` names it in its
/// `yaml-language-server` header). A test keeps it equal to [`schema`]. Not under
/// `specs/schema/`, which the build owns (it removes files it did not write there).
pub const SCHEMA_PATH: &str = "specs/config.schema.json";

/// The JSON Schema of `config.yaml`, from the configuration types themselves (so it cannot drift
/// from what the loader accepts).
pub fn schema() -> serde_json::Value {
    let mut v =
        serde_json::to_value(schemars::schema_for!(Config)).expect("schemars output is JSON");
    v["title"] = serde_json::Value::from("Bulkhead config.yaml");
    allow_variables_in_enums(&mut v);
    v
}

/// A choice (`environment: production`) may also be written as `${VAR…}`: it is expanded
/// before the value is read, so the file's text is a variable reference, not yet a choice.
fn allow_variables_in_enums(node: &mut serde_json::Value) {
    use serde_json::{Value, json};
    match node {
        Value::Object(map) => {
            // `enum` of strings, or (documented variants) `oneOf` of string `const`s.
            let is_choice = map
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| !e.is_empty() && e.iter().all(Value::is_string))
                || map.get("oneOf").and_then(Value::as_array).is_some_and(|e| {
                    !e.is_empty()
                        && e.iter()
                            .all(|v| v.get("const").is_some_and(Value::is_string))
                });
            if is_choice {
                let choice = Value::Object(std::mem::take(map));
                map.insert(
                    "anyOf".into(),
                    json!([choice, {"type": "string", "pattern": "\\$\\{[A-Za-z_][A-Za-z0-9_]*"}]),
                );
                return;
            }
            for child in map.values_mut() {
                allow_variables_in_enums(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(allow_variables_in_enums),
        _ => {}
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or holds something JSON cannot (a non-string key, `.inf`, a tag).
    #[error("{origin}:{line}:{col}: {message}")]
    Yaml {
        /// The file (or `embedded defaults`).
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// What is wrong.
        message: String,
    },
    /// `${VAR}` names a variable that is not set.
    #[error("{path}: environment variable {var} is not set")]
    Unset {
        /// The variable.
        var: String,
        /// Where.
        path: String,
    },
    /// `${VAR:?message}` / `${VAR?message}` with the variable unset (or empty for `:?`).
    #[error("{path}: environment variable {var}: {message}")]
    Required {
        /// The variable.
        var: String,
        /// Where.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A malformed `${…}` expression.
    #[error("{path}: {message}")]
    Syntax {
        /// Where.
        path: String,
        /// What is wrong.
        message: String,
    },
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
    expand(&mut value, &env_lookup)?;
    Ok(value)
}
