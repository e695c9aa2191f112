//! `echo` (test-only, feature `fixture-kind`): answers with its arguments, after a prefix.
//! The runtime half of the fixture kind that ARCHITECTURE.md's new-kind recipe was checked with.

use bulkhead_vocab::connector::EchoSettings;

use crate::server::{JsonObject, ToolOutput, ToolResult};

/// A built `echo` connector.
pub struct Echo {
    prefix: String,
}

impl Echo {
    /// Reads the settings.
    pub fn new(s: EchoSettings) -> Echo {
        Echo {
            prefix: s.prefix.unwrap_or_default(),
        }
    }

    /// The arguments as JSON text, after the prefix.
    pub fn run(&self, args: &JsonObject) -> ToolResult {
        let text = serde_json::to_string(args).unwrap_or_default();
        Ok(ToolOutput::Text(format!("{}{text}", self.prefix)))
    }
}
