//! What a tool may do: declared in the spec for every tool, never defaulted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a tool may do.
///
/// Ordered by reach, `Read < Write < Connect`: a higher permission is a wider one.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(description = "What a tool may do.")]
pub enum Permission {
    /// Reads data, no side effects.
    Read,
    /// Changes data inside the deployment.
    Write,
    /// Reaches the network outside the deployment.
    Connect,
}

impl Permission {
    /// Every permission, narrowest first.
    pub const ALL: [Permission; 3] = [Permission::Read, Permission::Write, Permission::Connect];

    /// The lowercase name used in specs, audit records and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Connect => "connect",
        }
    }

    /// The permission named `s` (`read`, `write`, `connect`).
    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
