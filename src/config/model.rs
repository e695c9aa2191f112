//! The shape of `config.yaml`: auth, HTTP, state locations, presets, stdio identity and the
//! `mcp_servers` client entries. Loaded with `${VAR}` expansion; unknown keys are errors.

use super::{ConfigError, expand, load_yaml};
use crate::auth::AuthConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The configuration shipped in the binary (the repository's `config.yaml`), used when no file is given.
pub const EMBEDDED: &str = include_str!("../../config.yaml");

/// Whether this is a development or production configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    /// Development: `bulkhead token` may mint tokens from the configured key.
    #[default]
    Development,
    /// Production: no dev tokens.
    Production,
}

/// The whole `config.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Development or production.
    #[serde(default)]
    pub environment: Environment,
    /// Token verification.
    pub auth: AuthConfig,
    /// Streamable HTTP settings.
    #[serde(default)]
    pub http: HttpConfig,
    /// Where state lives.
    #[serde(default)]
    pub state: StateConfig,
    /// Context preset overrides.
    #[serde(default)]
    pub context: ContextConfig,
    /// The identity of a stdio session (there is no token on stdio).
    #[serde(default)]
    pub stdio: StdioConfig,
    /// Client entries: how agents reach each server.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
}

/// Streamable HTTP settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The URL clients use (for the protected-resource metadata); default from the listen address.
    pub public_url: Option<String>,
    /// `Host` values accepted (DNS-rebinding protection); compose service names go here.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted; empty accepts requests without `Origin` only… and any origin.
    pub allowed_origins: Vec<String>,
    /// Keep transport sessions (protocol 2025-11-25); each is bound to the token's identity.
    pub stateful: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            public_url: None,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: Vec::new(),
            stateful: true,
        }
    }
}

/// State locations: compliance records and audit log (never inside a workspace), and workspaces.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Directory of the compliance database and the audit log.
    pub dir: PathBuf,
    /// Root of all workspaces (`<root>/<user>/<session>`).
    pub workspaces: PathBuf,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: ".bulkhead/state".into(),
            workspaces: ".bulkhead/workspaces".into(),
        }
    }
}

/// Context settings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// Preset overrides by name (fields of a preset); new names define presets.
    #[serde(default)]
    pub presets: Option<serde_json::Value>,
}

/// The identity used for stdio sessions.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StdioConfig {
    /// User id.
    pub user: String,
    /// Session id.
    pub session: String,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            user: "local".into(),
            session: "stdio".into(),
        }
    }
}

/// One `mcp_servers` entry: the URLs of a server's instances.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// Always `client`.
    #[serde(rename = "type", default = "client")]
    pub kind: String,
    /// The full-network instance.
    pub url: String,
    /// The proxied instance (confidential sessions).
    #[serde(default)]
    pub url_proxied: Option<String>,
    /// The isolated instance (secret sessions).
    #[serde(default)]
    pub url_isolated: Option<String>,
    /// Seconds to wait for a result.
    #[serde(default = "sixty")]
    pub read_timeout: u64,
    /// Whether `[FATAL] ` results from this server may abort a run.
    #[serde(default)]
    pub trusted: bool,
}

fn client() -> String {
    "client".into()
}

fn sixty() -> u64 {
    60
}

impl Config {
    /// Parses and expands a configuration text; `origin` names it in errors.
    pub fn parse(
        text: &str,
        origin: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut value = load_yaml(text, origin)?;
        expand(&mut value, lookup)?;
        serde_json::from_value(value).map_err(|e| ConfigError::Syntax {
            path: origin.to_string(),
            message: e.to_string(),
        })
    }

    /// Loads `path` with the process environment, or the embedded configuration when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let env = |k: &str| std::env::var(k).ok();
        match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                Config::parse(&text, &p.display().to_string(), &env)
            }
            None => Config::parse(EMBEDDED, "config.yaml (embedded)", &env),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_config_loads_with_defaults() {
        let c = Config::parse(EMBEDDED, "embedded", &|_| None).unwrap();
        assert_eq!(c.environment, Environment::Development);
        assert!(c.mcp_servers.contains_key("template"));
        assert!(!c.auth.keys.is_empty());
    }

    #[test]
    fn production_from_env_and_unknown_keys_refused() {
        let c = Config::parse(EMBEDDED, "embedded", &|k| {
            (k == "BULKHEAD_ENV").then(|| "production".to_string())
        })
        .unwrap();
        assert_eq!(c.environment, Environment::Production);
        let bad = format!("{EMBEDDED}\nsurprise: 1\n");
        assert!(Config::parse(&bad, "x", &|_| None).is_err());
    }
}
