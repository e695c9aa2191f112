//! How sensitive data is: the levels, their order, and which of them are private.

use crate::NetworkMode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How sensitive the data a tool or connector reads is.
///
/// Ordered `Public < Internal < Confidential < Secret`; a session's level only ever rises.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
    Default,
)]
#[serde(rename_all = "lowercase")]
#[schemars(description = "How sensitive the data a tool or connector reads is.")]
pub enum Sensitivity {
    /// No restriction.
    #[default]
    Public,
    /// Internal, not private.
    Internal,
    /// Private: connect tools are refused afterwards; proxied network.
    Confidential,
    /// Private: no network at all.
    Secret,
}

impl Sensitivity {
    /// All levels, lowest first (`ALL[level.index()] == level`).
    pub const ALL: [Sensitivity; 4] = [
        Sensitivity::Public,
        Sensitivity::Internal,
        Sensitivity::Confidential,
        Sensitivity::Secret,
    ];

    /// The trust-annotations extension's `sensitiveHint` for this level: `low` for what is not
    /// private, `medium` for confidential, `high` for secret.
    pub fn sensitive_hint(self) -> &'static str {
        match self {
            Sensitivity::Public | Sensitivity::Internal => "low",
            Sensitivity::Confidential => "medium",
            Sensitivity::Secret => "high",
        }
    }

    /// The lowercase name used in specs, `_meta` and audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            Sensitivity::Public => "public",
            Sensitivity::Internal => "internal",
            Sensitivity::Confidential => "confidential",
            Sensitivity::Secret => "secret",
        }
    }

    /// Parses the lowercase name.
    pub fn parse(s: &str) -> Option<Sensitivity> {
        Sensitivity::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The position in [`Sensitivity::ALL`] (what the stores and atomics keep).
    pub fn index(self) -> u8 {
        self as u8
    }

    /// The level at `index` in [`Sensitivity::ALL`], if any.
    pub fn from_index(index: u8) -> Option<Sensitivity> {
        Sensitivity::ALL.get(usize::from(index)).copied()
    }

    /// Private data is `confidential` or above: `connect` tools are refused once a session
    /// holds it.
    pub fn is_private(self) -> bool {
        self >= Sensitivity::Confidential
    }

    /// The placement rule: the least isolated network mode that may serve a session at this
    /// level (confidential needs `proxied`, secret needs `none`). Every instance plan, every
    /// re-admission and every client route derives from this one match.
    pub fn required_mode(self) -> NetworkMode {
        match self {
            Sensitivity::Public | Sensitivity::Internal => NetworkMode::Full,
            Sensitivity::Confidential => NetworkMode::Proxied,
            Sensitivity::Secret => NetworkMode::None,
        }
    }
}

impl fmt::Display for Sensitivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_privacy_and_names() {
        assert!(Sensitivity::Public < Sensitivity::Internal);
        assert!(Sensitivity::Confidential < Sensitivity::Secret);
        assert!(!Sensitivity::Internal.is_private());
        assert!(Sensitivity::Confidential.is_private());
        assert_eq!(Sensitivity::parse("secret"), Some(Sensitivity::Secret));
        assert_eq!(Sensitivity::parse("SECRET"), None);
        for (i, l) in Sensitivity::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(l.index()), i);
            assert_eq!(Sensitivity::from_index(l.index()), Some(l));
        }
        assert_eq!(Sensitivity::from_index(4), None);
    }
}
