//! DNS-rebinding and cross-origin protection for every route, not only `/mcp` (which rmcp checks
//! itself, later): a request whose `Host` is not in `http.allowed_hosts`, or whose `Origin` is not
//! in `http.allowed_origins`, is refused with 403 before anything else runs — before the token is
//! read and before a session limit is counted — so a page on another origin reads neither
//! `/metrics`, `/readyz`, `/healthz` nor the resource metadata, and is never told 401 or 429.
//! The rules are rmcp's (private in rmcp, so restated here and kept by the tests below): a host
//! entry without a port allows that host on any port, one with a port only that port, an empty
//! list allows all; an origin entry is `scheme://host[:port]`, `:*` for any port, or `null`, and an
//! empty list refuses every request that carries an Origin (requests without one pass).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `host[:port]`, lowercased, IPv6 without brackets.
fn split(authority: &str) -> Option<(String, Option<u16>)> {
    // A bare IPv6 address (`::1` in a list) has no brackets.
    if let Ok(ip) = authority.trim().parse::<std::net::Ipv6Addr>() {
        return Some((ip.to_string(), None));
    }
    let a: http::uri::Authority = authority.trim().parse().ok()?;
    let host = a
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let host = host
        .parse::<std::net::Ipv6Addr>()
        .map_or(host, |ip| ip.to_string());
    Some((host, a.port_u16()))
}

/// Whether `host` (a `Host` header value) is allowed by `allowed`.
pub fn allowed(host: &str, allowed: &[String]) -> bool {
    allowed_in(host, &parse_hosts(allowed))
}

/// `http.allowed_hosts` parsed once (entries that do not parse allow nothing); `None` when the
/// list is empty (every host is allowed).
fn parse_hosts(allowed: &[String]) -> Option<Vec<(String, Option<u16>)>> {
    (!allowed.is_empty()).then(|| allowed.iter().filter_map(|a| split(a)).collect())
}

/// `authority` split into host and port without allocating, when it is a name or an IPv4
/// address of `[A-Za-z0-9._-]` with an optional port of digits; `None` for anything else (an
/// IPv6 literal, other characters, an empty or out-of-range port), which takes [`split`]. Where
/// both answer they agree (`split` lowercases; the caller compares ignoring case).
fn split_plain(authority: &str) -> Option<(&str, Option<u16>)> {
    let a = authority.trim();
    let (host, port) = match a.split_once(':') {
        Some((h, p)) => {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (h, Some(p.parse::<u16>().ok()?))
        }
        None => (a, None),
    };
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_');
    (!host.is_empty() && host.bytes().all(plain)).then_some((host, port))
}

fn allowed_in(host: &str, allowed: &Option<Vec<(String, Option<u16>)>>) -> bool {
    let Some(allowed) = allowed else {
        return true;
    };
    let admits = |h: &str, port: Option<u16>| {
        allowed.iter().any(|(ah, ap)| {
            ah.eq_ignore_ascii_case(h)
                && match ap {
                    Some(p) => port == Some(*p),
                    None => true,
                }
        })
    };
    if let Some((h, port)) = split_plain(host) {
        return admits(h, port);
    }
    split(host).is_some_and(|(h, port)| admits(&h, port))
}

type Origin = Option<(String, String, Option<u16>)>;

/// Parses an `Origin` value (`Some(None)` for `null`; `None` when malformed).
fn origin(value: &str) -> Option<Origin> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("null") {
        return Some(None);
    }
    let uri: http::Uri = value.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let (host, port) = split(uri.authority()?.as_str())?;
    Some(Some((scheme, host, port)))
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Whether `value` (an `Origin` header) is allowed by `allowed`.
pub fn origin_allowed(value: &str, allowed: &[String]) -> bool {
    let Some(o) = origin(value) else {
        return false;
    };
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        let (base, any_port) = match entry.strip_suffix(":*") {
            Some(b) => (b, true),
            None => (entry, false),
        };
        match (origin(base), &o) {
            (Some(None), None) => !any_port,
            (Some(Some((s, h, p))), Some((os, oh, op))) => {
                s == *os
                    && h == *oh
                    && (any_port || p.is_none() || p == op.or_else(|| default_port(os)))
            }
            _ => false,
        }
    })
}

/// What the middleware checks: `http.allowed_hosts` and `http.allowed_origins`.
#[derive(Clone, Debug, Default)]
pub struct Allowed {
    /// Host entries, parsed (`None`: the list is empty, every host is allowed).
    hosts: Option<Vec<(String, Option<u16>)>>,
    /// Origin entries.
    origins: Vec<String>,
}

impl Allowed {
    /// The lists of `http.allowed_hosts` and `http.allowed_origins` (hosts parsed once here).
    pub fn new(hosts: &[String], origins: &[String]) -> Allowed {
        Allowed {
            hosts: parse_hosts(hosts),
            origins: origins.to_vec(),
        }
    }
}

/// The middleware: 403 for a `Host` or an `Origin` outside its list (400 without a `Host`).
pub async fn check_host(State(list): State<Arc<Allowed>>, req: Request, next: Next) -> Response {
    if let Some(o) = req.headers().get(http::header::ORIGIN) {
        let ok = o.to_str().is_ok_and(|o| origin_allowed(o, &list.origins));
        if !ok {
            return (StatusCode::FORBIDDEN, "Origin not allowed\n").into_response();
        }
    }
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    match host.map(|h| allowed_in(h, &list.hosts)) {
        Some(true) => next.run(req).await,
        Some(false) => (StatusCode::FORBIDDEN, "Host not allowed\n").into_response(),
        None => (StatusCode::BAD_REQUEST, "no Host header\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_rmcps() {
        let list = vec![
            "localhost".to_string(),
            "example.com:8080".into(),
            "::1".into(),
        ];
        assert!(allowed("localhost:8000", &list));
        assert!(allowed("LOCALHOST", &list));
        assert!(allowed("[::1]:80", &list));
        assert!(allowed("example.com:8080", &list));
        assert!(!allowed("example.com:9090", &list));
        assert!(!allowed("evil.example", &list));
        assert!(!allowed("localhost.evil.example", &list));
        assert!(!allowed("", &list));
        assert!(allowed("anything", &[]));
    }

    /// The allocation-free split agrees with the full parse wherever it answers.
    #[test]
    fn the_quick_split_agrees_with_the_full_parse() {
        let lists: [&[&str]; 3] = [
            &["localhost", "example.com:8080", "::1", "127.0.0.1:3000"],
            &["LocalHost:80", "a_b.example"],
            &["[::1]:8080", "10.0.0.1"],
        ];
        let hosts = [
            "localhost",
            "LOCALHOST:8000",
            "localhost:",
            "localhost:+80",
            "localhost:080",
            "localhost:65536",
            "localhost:99999999999",
            "example.com:8080",
            "EXAMPLE.COM:8080",
            "example.com:9090",
            "127.0.0.1:3000",
            "127.0.0.1",
            "127.0.0.1:3001",
            "[::1]:8080",
            "[::1]",
            "::1",
            "a_b.example",
            "a%62.example",
            "user@localhost",
            "localhost/x",
            " localhost ",
            "",
            ":80",
            "10.0.0.1:1",
            "local host",
            "xn--bcher-kva.example:80",
        ];
        for list in lists {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            let parsed = parse_hosts(&list);
            for h in hosts {
                let full = split(h).is_some_and(|(h, port)| {
                    parsed
                        .as_ref()
                        .unwrap()
                        .iter()
                        .any(|(ah, ap)| *ah == h && ap.is_none_or(|p| port == Some(p)))
                });
                assert_eq!(allowed_in(h, &parsed), full, "{h:?} against {list:?}");
            }
        }
    }

    #[test]
    fn the_origin_rule_is_rmcps() {
        let list = vec![
            "http://localhost:*".to_string(),
            "https://app.example.com".into(),
            "http://[::1]:8080".into(),
            "https://exact.example:443".into(),
        ];
        assert!(origin_allowed("http://localhost:3000", &list));
        assert!(origin_allowed("http://localhost", &list));
        assert!(!origin_allowed("https://localhost:3000", &list));
        assert!(origin_allowed("https://app.example.com:8443", &list));
        assert!(origin_allowed("http://[::1]:8080", &list));
        assert!(!origin_allowed("http://[::1]:8081", &list));
        assert!(origin_allowed("https://exact.example", &list));
        assert!(!origin_allowed("https://evil.example", &list));
        assert!(!origin_allowed("null", &list));
        assert!(origin_allowed("null", &["null".to_string()]));
        assert!(!origin_allowed("http://localhost:3000", &[]));
        assert!(!origin_allowed("not an origin", &list));
    }
}
