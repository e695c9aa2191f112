//! `postgres`: a PostgreSQL database with named, parameterised SQL.

use super::count::{Count, SettingError, count};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of a `postgres` connector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresSettings {
    /// Connection URL, `postgres://user@host:port/db` (keep the password in a `secrets:` variable).
    pub url: String,
    /// Milliseconds to wait for a connection (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<Count>,
    /// Milliseconds a statement may run before the server cancels it (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement_timeout_ms: Option<Count>,
    /// Connections kept open per instance (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<Count>,
}

impl PostgresSettings {
    /// Milliseconds to wait for a connection.
    pub fn connect_timeout_ms(&self) -> Result<u64, SettingError> {
        count(&self.connect_timeout_ms, "connect_timeout_ms", 5000)
    }

    /// Milliseconds a statement may run.
    pub fn statement_timeout_ms(&self) -> Result<u64, SettingError> {
        count(&self.statement_timeout_ms, "statement_timeout_ms", 30_000)
    }

    /// Connections kept open per instance.
    pub fn max_connections(&self) -> Result<u64, SettingError> {
        count(&self.max_connections, "max_connections", 4)
    }
}
