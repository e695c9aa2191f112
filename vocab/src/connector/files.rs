//! `files`: the caller's own workspace. No settings.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings of a `files` connector: none (it works in the caller's own workspace).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesSettings {}
