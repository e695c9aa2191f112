//! `logs`: a folder of log files searched with regexes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of a `logs` connector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsSettings {
    /// Folder whose log files are searched (not its subfolders).
    pub dir: String,
}
