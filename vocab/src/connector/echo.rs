//! `echo` (test-only, feature `fixture-kind`): answers with its arguments. Kept as the fixture
//! of ARCHITECTURE.md's recipe for a new connector kind: it was added by following it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of an `echo` connector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EchoSettings {
    /// Text put before every answer (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}
