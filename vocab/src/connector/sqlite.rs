//! `sqlite`: an SQLite database file with named, parameterised SQL.

use super::count::{Count, SettingError, count};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of a `sqlite` connector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqliteSettings {
    /// Path of the database file (reads open it read-only; nothing creates it).
    pub path: String,
    /// Milliseconds to wait for a lock held by another writer (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_timeout_ms: Option<Count>,
}

impl SqliteSettings {
    /// Milliseconds to wait for another writer's lock.
    pub fn busy_timeout_ms(&self) -> Result<u64, SettingError> {
        count(&self.busy_timeout_ms, "busy_timeout_ms", 5000)
    }
}
