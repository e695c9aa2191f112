//! `proxy/<deployment>-<server>.squid.conf`: the egress policy of a proxied instance's proxy
//! (Debian's squid). Deny by default; allows exactly the deployment's `proxied_egress`.
//!
//! The file holds policy only. Where the proxy listens and logs comes from a two-line wrapper
//! that `include`s it unchanged: the proxy image's `/etc/squid/squid.conf` in compose (see
//! `docker/Dockerfile.proxy`), and the file `bulkhead up` writes beside its own squid. Both
//! render the policy with [`squid_policy`], so what a reviewer reads is what runs.

use super::{HostPort, NetworkMode, plan};
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use bulkhead_vocab::ranges;
use std::fmt::Write as _;

/// The header a jail's gate labels its requests with (the engine's `jail::egress` writes it).
pub const CONNECTOR_HEADER: &str = "Bulkhead-Connector";

const EXPLAIN: &str = "\
# Egress policy of the proxied instance (squid): everything not listed here is refused.
# - The instance reaches the internet only through this proxy (HTTP_PROXY/HTTPS_PROXY); its
#   network has no other way out. `CONNECT host:port` is tunnelled, and plain HTTP forwarded,
#   only for the allowlisted `host:port` pairs below (names match exactly, no subdomains).
#   Anything else gets 403 (`X-Squid-Error: ERR_ACCESS_DENIED`) without squid contacting it.
# - An allowlisted *name* that resolves to a special-purpose address (the IANA registries:
#   loopback, link-local and cloud metadata, private, shared, unique-local, benchmarking,
#   documentation, multicast, reserved, NAT64/6to4/Teredo) is refused (DNS rebinding, or an
#   internal host behind a public name), unless the deployment names that internal range
#   (`internal_ranges`); DNS is only asked for allowlisted names.
# - A request from a jail (a sandbox run, a launched upstream) comes through its gate, which
#   labels it with its connector (`Bulkhead-Connector`): it reaches only the entries that
#   connector declares in its own `egress`, not those of the instance's other connectors.
# - Nothing is cached; no Via or X-Forwarded-For header is added; no version string is sent.
";

fn is_ip_literal(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
}

/// A connector whose jails reach out through the proxy (their gate labels each request with the
/// connector's name, `Bulkhead-Connector`), with its own `egress`.
#[derive(Clone, Copy, Debug)]
pub struct Gated<'a> {
    /// The connector.
    pub connector: &'a str,
    /// Its own `egress` entries.
    pub egress: &'a [HostPort],
}

/// The squid directives that allow exactly `allowed` (the shared part of every proxy config);
/// allowlisted names may resolve into the `internal` ranges the deployment names, never into
/// any other special-purpose range ([`bulkhead_vocab::ranges`]); a request a jail's gate
/// labelled with a connector of `gated` reaches only the entries of `allowed` that connector
/// declares itself.
pub fn squid_policy(allowed: &[HostPort], internal: &[String], gated: &[Gated<'_>]) -> String {
    let mut out = String::new();
    for (i, a) in allowed.iter().enumerate() {
        let n = i + 1;
        if is_ip_literal(&a.host) {
            let _ = writeln!(out, "acl bh_p{n}_host dst -n {}", a.host);
        } else {
            let _ = writeln!(out, "acl bh_p{n}_host dstdomain -n {}", a.host);
        }
        let _ = writeln!(out, "acl bh_p{n}_port port {}", a.port);
    }
    let mut names: Vec<&str> = allowed
        .iter()
        .filter(|a| !is_ip_literal(&a.host))
        .map(|a| a.host.as_str())
        .collect();
    names.sort();
    names.dedup();
    if !names.is_empty() {
        let _ = writeln!(out, "acl bh_names dstdomain -n {}", names.join(" "));
        let blocked: Vec<&str> = ranges::outermost().map(|r| r.cidr).collect();
        let _ = writeln!(out, "acl bh_blocked_ip dst {}", blocked.join(" "));
        if internal.is_empty() {
            out.push_str("http_access deny bh_names bh_blocked_ip\n");
        } else {
            let _ = writeln!(out, "acl bh_internal_ok dst {}", internal.join(" "));
            out.push_str("http_access deny bh_names bh_blocked_ip !bh_internal_ok\n");
        }
    }
    for (k, g) in gated.iter().enumerate() {
        let c = k + 1;
        let _ = writeln!(
            out,
            "# requests of connector `{}`'s jails (labelled by their gate) reach only its own egress",
            g.connector
        );
        let _ = writeln!(
            out,
            "acl bh_c{c} req_header {CONNECTOR_HEADER} ^{}$",
            g.connector
        );
        for (i, a) in allowed.iter().enumerate() {
            if g.egress.contains(a) {
                let n = i + 1;
                let _ = writeln!(out, "http_access allow bh_c{c} bh_p{n}_host bh_p{n}_port");
            }
        }
        let _ = writeln!(out, "http_access deny bh_c{c}");
    }
    for (i, a) in allowed.iter().enumerate() {
        let n = i + 1;
        // squid has no trailing comments: the pair goes on its own line.
        let _ = writeln!(out, "# {}", a.authority());
        let _ = writeln!(out, "http_access allow bh_p{n}_host bh_p{n}_port");
    }
    // The label is the gate's word to this proxy, never sent on.
    let _ = writeln!(out, "request_header_access {CONNECTOR_HEADER} deny all");
    out.push_str(
        "http_access deny all\n\
         cache deny all\n\
         cache_mem 0 MB\n\
         digest_generation off\n\
         via off\n\
         forwarded_for delete\n\
         httpd_suppress_version_string on\n\
         netdb_filename none\n\
         pinger_enable off\n\
         logfile_rotate 0\n\
         shutdown_lifetime 1 seconds\n",
    );
    out
}

/// Adds one policy file per proxied server of `d`.
pub fn emit(model: &Model, d: &Deployment, out: &mut Output) {
    for p in plan(model, d) {
        if p.instance(NetworkMode::Proxied).is_none() {
            continue;
        }
        let mut text = header("#", &[&d.source]);
        text.push_str(EXPLAIN);
        if p.allowed.is_empty() {
            text.push_str("# `proxied_egress` is empty: this proxy refuses everything.\n");
        }
        text.push_str(&squid_policy(
            &p.allowed,
            &p.server.internal_ranges,
            &p.gated(),
        ));
        out.add(
            format!("proxy/{}-{}.squid.conf", d.name, p.server.name),
            text,
        );
    }
}
