//! `postgres`: a PostgreSQL database with named, parameterised SQL.

use super::count::{Count, SettingError, count};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of a `postgres` connector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresSettings {
    /// Connection URL, `postgres://user@host:port/db` (keep the password in a `secrets:` variable).
    /// `?sslmode=verify-full` encrypts and verifies the server's certificate and name (against
    /// `sslrootcert=<PEM file>`, or the system's roots); `require` and `verify-ca` verify as
    /// much; `prefer` and `allow`, which fall back to clear text, are refused.
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
    /// Operations that declare the named parameter (bound to the caller's token) run each
    /// statement as the database role it holds (`SET LOCAL ROLE`, one of `roles`), so grants and
    /// row-level security see the user, not the connector's login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_role: Option<SetRole>,
}

/// `set_role` of a `postgres` connector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRole {
    /// The parameter holding the role: an operation that declares it (with `from_claim`, so the
    /// model never chooses it; its SQL does not use it) runs as that role.
    pub param: String,
    /// The roles that may be set; a caller whose claim names another is refused.
    pub roles: Vec<String>,
}

impl SetRole {
    /// Why this cannot be used, if it cannot: no roles, or a role that is not a plain lowercase
    /// PostgreSQL identifier (so it needs no quoting and names one role only).
    pub fn problem(&self) -> Option<String> {
        if self.roles.is_empty() {
            return Some("`set_role.roles` is empty: name the roles callers may act as".into());
        }
        self.roles
            .iter()
            .find(|r| !is_role_name(r))
            .map(|r| format!("`set_role.roles`: `{r}` is not a plain lowercase role name (`[a-z_][a-z0-9_]*`, at most 63 bytes)"))
    }

    /// Whether `role` may be set.
    pub fn allows(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

/// `[a-z_][a-z0-9_]{0,62}`: a role name PostgreSQL takes unquoted, as written.
pub fn is_role_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
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
