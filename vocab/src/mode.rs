//! The network an instance runs with, and the placement rule's other half: which modes a
//! server needs and which level a mode implies.

use crate::Sensitivity;
use serde::{Deserialize, Serialize};
use std::fmt;

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

/// How an instance reaches what lies beyond the deployment, by its mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Straight out, on the network it runs in.
    Direct,
    /// Only through the deployment's egress proxy, to its allowlist.
    Proxy,
    /// Not at all.
    Nothing,
}

impl NetworkMode {
    /// How an instance in this mode reaches beyond the deployment. Every consequence of a mode
    /// outside this crate is read from here or from [`NetworkMode::is_isolated`], never by
    /// comparing modes, so a new mode is a compile error wherever it needs a decision.
    pub fn egress(self) -> Egress {
        match self {
            NetworkMode::Full => Egress::Direct,
            NetworkMode::Proxied => Egress::Proxy,
            NetworkMode::None => Egress::Nothing,
        }
    }

    /// Whether an instance in this mode runs behind the isolation: in a network of its own with
    /// no route out but what its mode allows, reached over a Unix socket through a bridge, and
    /// its network checked at start and while it runs (every mode but `full`).
    pub fn is_isolated(self) -> bool {
        match self {
            NetworkMode::Full => false,
            NetworkMode::Proxied | NetworkMode::None => true,
        }
    }

    /// Whether an instance in this mode is given the deployment's egress proxy.
    pub fn uses_proxy(self) -> bool {
        match self.egress() {
            Egress::Proxy => true,
            Egress::Direct | Egress::Nothing => false,
        }
    }

    /// Every mode, least isolated first (`ALL[mode.index()] == mode`).
    pub const ALL: [NetworkMode; 3] = [NetworkMode::Full, NetworkMode::Proxied, NetworkMode::None];

    /// The lowercase name used on the command line, in deployment files and in `_meta`.
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

    /// The position in [`NetworkMode::ALL`].
    pub fn index(self) -> u8 {
        self as u8
    }

    /// The mode at `index` in [`NetworkMode::ALL`], if any.
    pub fn from_index(index: u8) -> Option<NetworkMode> {
        NetworkMode::ALL.get(usize::from(index)).copied()
    }

    /// Whether an instance in this mode may serve a session at `level`.
    pub fn serves(self, level: Sensitivity) -> bool {
        self >= level.required_mode()
    }

    /// The least level that needs this mode: what a refusal naming the mode tells about the
    /// session (the inverse of [`Sensitivity::required_mode`] on its lowest level).
    pub fn least_level(self) -> Sensitivity {
        Sensitivity::ALL
            .into_iter()
            .find(|l| l.required_mode() == self)
            .unwrap_or(Sensitivity::Secret)
    }

    /// The instances a server whose tools reach `max` needs, least isolated first: one per
    /// mode from `full` up to the mode `max` requires.
    pub fn needed_for(max: Sensitivity) -> impl Iterator<Item = NetworkMode> {
        NetworkMode::ALL
            .into_iter()
            .filter(move |m| *m <= max.required_mode())
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
    fn modes_serve_levels_one_way() {
        assert!(NetworkMode::Full.serves(Sensitivity::Internal));
        assert!(!NetworkMode::Full.serves(Sensitivity::Confidential));
        assert!(NetworkMode::Proxied.serves(Sensitivity::Confidential));
        assert!(!NetworkMode::Proxied.serves(Sensitivity::Secret));
        assert!(NetworkMode::None.serves(Sensitivity::Secret));
        assert!(NetworkMode::None.serves(Sensitivity::Public));
    }

    #[test]
    fn least_level_inverts_the_placement_rule() {
        assert_eq!(NetworkMode::Full.least_level(), Sensitivity::Public);
        assert_eq!(
            NetworkMode::Proxied.least_level(),
            Sensitivity::Confidential
        );
        assert_eq!(NetworkMode::None.least_level(), Sensitivity::Secret);
        for m in NetworkMode::ALL {
            assert_eq!(m.least_level().required_mode(), m);
            assert_eq!(NetworkMode::from_index(m.index()), Some(m));
        }
    }

    #[test]
    fn a_server_needs_every_mode_up_to_its_highest_level() {
        let needed = |l| NetworkMode::needed_for(l).collect::<Vec<_>>();
        use NetworkMode::*;
        assert_eq!(needed(Sensitivity::Public), [Full]);
        assert_eq!(needed(Sensitivity::Internal), [Full]);
        assert_eq!(needed(Sensitivity::Confidential), [Full, Proxied]);
        assert_eq!(needed(Sensitivity::Secret), [Full, Proxied, None]);
    }
}
