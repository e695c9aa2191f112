//! nftables rulesets for instance namespaces: inbound only to the serving port, outbound only to an
//! allowlist (empty for `none`). Pure text, so the rules are reviewable and unit-tested.

use std::fmt::Write as _;
use std::net::SocketAddrV4;

/// The ruleset for a namespace serving on `port` that may open connections only to `allow`.
pub fn ruleset(port: u16, allow: &[SocketAddrV4]) -> String {
    let mut out = String::from("table inet bulkhead {\n");
    out.push_str("  chain input {\n    type filter hook input priority 0; policy drop;\n");
    out.push_str("    iif \"lo\" accept\n    ct state established,related accept\n");
    let _ = writeln!(out, "    tcp dport {port} ct state new accept");
    out.push_str("  }\n");
    out.push_str("  chain output {\n    type filter hook output priority 0; policy drop;\n");
    out.push_str("    oif \"lo\" accept\n    ct state established,related accept\n");
    for a in allow {
        let _ = writeln!(
            out,
            "    ip daddr {} tcp dport {} ct state new accept",
            a.ip(),
            a.port()
        );
    }
    // Refuse at once (the policy would drop silently and callers would wait for a timeout).
    out.push_str("    meta l4proto tcp reject with tcp reset\n    reject\n");
    out.push_str("  }\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_allows_no_new_outbound_connection() {
        let r = ruleset(8000, &[]);
        assert!(r.contains("chain output {\n    type filter hook output priority 0; policy drop;"));
        assert!(!r.contains("daddr"));
        assert!(r.contains("tcp dport 8000 ct state new accept"));
    }

    #[test]
    fn proxied_allows_exactly_its_allowlist() {
        let r = ruleset(8000, &["10.251.0.200:8080".parse().unwrap()]);
        assert_eq!(r.matches("daddr").count(), 1);
        assert!(r.contains("ip daddr 10.251.0.200 tcp dport 8080 ct state new accept"));
    }
}
