//! A process checks, without sending anything, that its network matches its mode: an instance
//! started with `--mode none` must have no route except loopback (its own network namespace, or a
//! container with `network_mode: none`). Read from `/proc/net/route` and `/proc/net/ipv6_route`.
//! `proxied` cannot be checked without traffic (its egress rules live in the namespace's
//! nftables, applied by `bulkhead up`), `full` needs nothing.

use crate::policy::NetworkMode;

/// Interfaces that carry a route, other than loopback.
fn routed_interfaces() -> Vec<String> {
    let mut out = Vec::new();
    let v4 = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    for line in v4.lines().skip(1) {
        if let Some(iface) = line.split_whitespace().next() {
            out.push(iface.to_owned());
        }
    }
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    for line in v6.lines() {
        if let Some(iface) = line.split_whitespace().last() {
            out.push(iface.to_owned());
        }
    }
    out.retain(|i| i != "lo");
    out.sort();
    out.dedup();
    out
}

/// `Ok` when this process's network fits `mode` as far as can be seen locally.
pub fn check(mode: NetworkMode) -> Result<(), String> {
    if mode != NetworkMode::None {
        return Ok(());
    }
    let routed = routed_interfaces();
    if routed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "network mode `none`, but this process has routes through {}: run it in its own network namespace (`bulkhead up`) or a container without network",
        routed
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
