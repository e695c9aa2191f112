//! Local isolation without Docker: each instance of a deployment runs as a process, the isolated
//! ones inside Linux network namespaces whose egress the kernel filters (nftables).
//!
//! - `full`: the host network, listening on loopback.
//! - `proxied`: its own namespace on a private bridge (`egress`); nftables allows new outbound
//!   connections only to the resolved `proxied_egress` allowlist.
//! - `none`: its own namespace with a point-to-point link to the host; nftables drops every new
//!   outbound connection. Clients reach it over that link.

pub mod firewall;
pub mod layers;
pub mod netns;
pub mod resolver;
pub mod selfcheck;
pub mod up;

/// Why isolation could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    /// A command (`ip`, `nft`) failed.
    #[error("`{cmd}` failed: {detail}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its stderr or the spawn error.
        detail: String,
    },
    /// Network namespaces need root (or CAP_SYS_ADMIN + CAP_NET_ADMIN).
    #[error(
        "network namespaces are not permitted here ({0}); run `bulkhead up` as root (e.g. `sudo -E`), or use the compose files in generated/compose/ where Docker is available"
    )]
    NotPermitted(String),
    /// Something else.
    #[error("{0}")]
    Other(String),
}
