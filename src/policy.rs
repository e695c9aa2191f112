//! The three declared properties of every tool: permission, sensitivity, and the network mode they imply.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a tool may do. Declared in the spec for every tool; never defaulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Reads data; no side effects.
    Read,
    /// Changes data inside the deployment (workspace, local databases).
    Write,
    /// Reaches the network outside the deployment; refused once a session holds private data.
    Connect,
}

impl Permission {
    /// The lowercase name used in specs, audit records and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Connect => "connect",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How sensitive data is. Ordered: `Public < Internal < Confidential < Secret`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Sensitivity {
    /// No restriction.
    #[default]
    Public,
    /// Internal to the organisation, not private.
    Internal,
    /// Private data: `connect` tools are refused, the session needs at least a proxied instance.
    Confidential,
    /// Private data that must not reach any network.
    Secret,
}

impl Sensitivity {
    /// All levels, lowest first.
    pub const ALL: [Sensitivity; 4] = [
        Sensitivity::Public,
        Sensitivity::Internal,
        Sensitivity::Confidential,
        Sensitivity::Secret,
    ];

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

    /// Private data is `confidential` or above.
    pub fn is_private(self) -> bool {
        self >= Sensitivity::Confidential
    }

    /// The least isolated network mode that may serve a session at this level.
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

/// The network an instance runs with. Ordered from least to most isolated.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// Full network access.
    #[default]
    Full,
    /// Egress only to an allowlist through a proxy.
    Proxied,
    /// No network beyond the agent that calls it.
    None,
}

impl NetworkMode {
    /// Every mode, least isolated first.
    pub const ALL: [NetworkMode; 3] = [NetworkMode::Full, NetworkMode::Proxied, NetworkMode::None];

    /// The lowercase name used on the command line and in deployment files.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Full => "full",
            NetworkMode::Proxied => "proxied",
            NetworkMode::None => "none",
        }
    }

    /// The mode named `s` (`full`, `proxied`, `none`).
    pub fn parse(s: &str) -> Option<NetworkMode> {
        NetworkMode::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Whether an instance in this mode may serve a session at `level`.
    pub fn serves(self, level: Sensitivity) -> bool {
        self >= level.required_mode()
    }
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitivity_order_and_privacy() {
        assert!(Sensitivity::Public < Sensitivity::Internal);
        assert!(Sensitivity::Confidential < Sensitivity::Secret);
        assert!(!Sensitivity::Internal.is_private());
        assert!(Sensitivity::Confidential.is_private());
        assert_eq!(Sensitivity::parse("secret"), Some(Sensitivity::Secret));
        assert_eq!(Sensitivity::parse("SECRET"), None);
    }

    /// The deployment emitters (codegen cannot link the runtime) restate `required_mode` to
    /// decide which instance runs a tool: the two must never disagree.
    #[test]
    fn the_emitters_place_tools_where_the_runtime_serves_them() {
        use bulkhead_codegen::emit::deploy::Mode;
        use bulkhead_codegen::spec::Sensitivity as Spec;
        for (spec, rt) in [
            (Spec::Public, Sensitivity::Public),
            (Spec::Internal, Sensitivity::Internal),
            (Spec::Confidential, Sensitivity::Confidential),
            (Spec::Secret, Sensitivity::Secret),
        ] {
            assert_eq!(
                Mode::for_sensitivity(spec).as_str(),
                rt.required_mode().as_str()
            );
        }
    }

    #[test]
    fn modes_serve_levels_one_way() {
        assert!(NetworkMode::Full.serves(Sensitivity::Internal));
        assert!(!NetworkMode::Full.serves(Sensitivity::Confidential));
        assert!(NetworkMode::Proxied.serves(Sensitivity::Confidential));
        assert!(!NetworkMode::Proxied.serves(Sensitivity::Secret));
        assert!(NetworkMode::None.serves(Sensitivity::Secret));
        assert!(NetworkMode::None.serves(Sensitivity::Public));
    }
}
