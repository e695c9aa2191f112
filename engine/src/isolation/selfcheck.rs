//! An instance checks that its network matches its mode, at start and every
//! [`RECHECK_EVERY`] (`BULKHEAD_SELFCHECK_SECS`), and refuses to work while it does not:
//!
//! - `proxied` and `none`: no default route and no route through a gateway, IPv4 or IPv6 — only
//!   loopback and directly connected links (its own namespace from `bulkhead up`, whose
//!   links lead to the agents' side and the egress proxy only, or a container on internal
//!   networks). Read from `/proc/net/route` and `/proc/net/ipv6_route`; nothing is sent.
//! - `proxied` with an egress proxy configured (`HTTPS_PROXY`/`HTTP_PROXY`): the proxy must refuse
//!   `CONNECT 192.0.2.1:443` (TEST-NET-1, never routed, on no allowlist); a proxy that tunnels it
//!   lets anything out. Our squid policy refuses it without contacting the address.
//! - `proxied` and `none`: no name server of `/etc/resolv.conf` answers (a DNS query is a way
//!   out; [`super::resolver`]).
//! - `full`: nothing to check.
//!
//! Invariant (enforced here and in `Runtime::call_with` through [`IsolationStatus`]): an instance
//! whose last check failed runs no tool call and answers 503 on `/healthz`.

use crate::policy::NetworkMode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a serving instance checks again (`BULKHEAD_SELFCHECK_SECS` overrides it, ≥ 1).
pub const RECHECK_EVERY: Duration = Duration::from_secs(30);

fn recheck_every() -> Duration {
    std::env::var("BULKHEAD_SELFCHECK_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(RECHECK_EVERY, |s| Duration::from_secs(s.max(1)))
}

/// The address the proxy probe asks to reach (TEST-NET-1: documentation only, never routed).
const PROBE_TARGET: &str = "192.0.2.1:443";

/// Routes that leave this host's links: (interface, destination, why).
fn routes_out() -> Vec<String> {
    let mut out = Vec::new();
    let v4 = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    for line in v4.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
        if f.len() < 8 || f[0] == "lo" {
            continue;
        }
        if f[1] == "00000000" && f[7] == "00000000" {
            out.push(format!("a default route through `{}`", f[0]));
        } else if f[2] != "00000000" {
            out.push(format!("a route through a gateway on `{}`", f[0]));
        }
    }
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    for line in v6.lines() {
        // dest dest_len src src_len next_hop metric refcnt use flags iface
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 || f[9] == "lo" {
            continue;
        }
        let flags = u32::from_str_radix(f[8], 16).unwrap_or(0);
        const RTF_REJECT: u32 = 0x0200;
        if flags & RTF_REJECT != 0 {
            continue;
        }
        if f[1] == "00" {
            out.push(format!("a default IPv6 route through `{}`", f[9]));
        } else if f[4].bytes().any(|b| b != b'0') {
            out.push(format!("an IPv6 route through a gateway on `{}`", f[9]));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The routing part of the check (synchronous, reads `/proc` only).
pub fn check(mode: NetworkMode) -> Result<(), String> {
    if !mode.is_isolated() {
        return Ok(());
    }
    let routes = routes_out();
    if routes.is_empty() {
        return Ok(());
    }
    Err(format!(
        "network mode `{mode}`, but this process has {}: run it in its own network namespace (`bulkhead up`) or a container on internal networks only",
        routes.join(", ")
    ))
}

/// The proxy part of the check: `Err` only when the proxy at `proxy` (`host:port`) tunnels to
/// an address no allowlist names. An unreachable proxy isolates too (nothing gets out); it is
/// logged, not refused.
pub async fn probe_proxy(proxy: &str) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(proxy).await?;
        s.write_all(
            format!("CONNECT {PROBE_TARGET} HTTP/1.1\r\nHost: {PROBE_TARGET}\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await?;
        Ok::<String, std::io::Error>(String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(3), attempt).await {
        Ok(Ok(status))
            if status.starts_with("HTTP/1.1 200") || status.starts_with("HTTP/1.0 200") =>
        {
            Err(format!(
                "the egress proxy {proxy} tunnels to {PROBE_TARGET}, which no allowlist names: it does not filter egress"
            ))
        }
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            tracing::warn!(%proxy, error = %e, "egress proxy unreachable (nothing gets out)");
            Ok(())
        }
        Err(_) => {
            tracing::warn!(%proxy, "egress proxy did not answer the isolation probe in 3 s");
            Ok(())
        }
    }
}

/// Every part of the check: routes, name servers ([`super::resolver`]), and the proxy part for
/// `proxied` with a configured proxy.
pub async fn full_check(mode: NetworkMode) -> Result<(), String> {
    check(mode)?;
    super::resolver::check(mode).await?;
    match crate::config::egress_proxy() {
        Some(proxy) if mode.uses_proxy() => probe_proxy(&proxy).await,
        _ => Ok(()),
    }
}

/// The last check's result, shared by the call wrapper and `/healthz`.
#[derive(Debug, Default)]
pub struct IsolationStatus {
    broken: AtomicBool,
    why: Mutex<Option<String>>,
    unchecked: AtomicBool,
}

impl IsolationStatus {
    /// Records a check's result.
    pub fn record(&self, result: Result<(), String>) {
        let broken = result.is_err();
        if let Ok(mut w) = self.why.lock() {
            *w = result.err();
        }
        if broken && !self.broken.swap(true, Ordering::SeqCst) {
            tracing::error!(why = ?self.broken_because(), "isolation check failed: refusing calls");
        } else if !broken && self.broken.swap(false, Ordering::SeqCst) {
            tracing::warn!("isolation check passes again: serving calls");
        }
    }

    /// Marks the instance as started without checks (`serve --unisolated`).
    pub fn mark_unchecked(&self) {
        self.unchecked.store(true, Ordering::Relaxed);
    }

    /// Whether checks are off for this instance.
    pub fn is_unchecked(&self) -> bool {
        self.unchecked.load(Ordering::Relaxed)
    }

    /// Why the last check failed, if it did (one atomic load when it did not).
    pub fn broken_because(&self) -> Option<String> {
        if !self.broken.load(Ordering::SeqCst) {
            return None;
        }
        self.why.lock().ok().and_then(|w| w.clone())
    }
}

/// Checks every [`RECHECK_EVERY`] until `stop` fires, recording into `status`.
pub async fn recheck_forever(
    mode: NetworkMode,
    status: std::sync::Arc<IsolationStatus>,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(recheck_every()) => status.record(full_check(mode).await),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_status_is_reported_until_it_passes_again() {
        let s = IsolationStatus::default();
        assert_eq!(s.broken_because(), None);
        s.record(Err("a default route through `eth0`".into()));
        assert_eq!(
            s.broken_because().as_deref(),
            Some("a default route through `eth0`")
        );
        s.record(Ok(()));
        assert_eq!(s.broken_because(), None);
    }
}
