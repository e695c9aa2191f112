//! DNS-rebinding protection for every route, not only `/mcp` (which rmcp checks itself): a request
//! whose `Host` is not in `http.allowed_hosts` is refused with 403 before any handler runs, so a
//! page on another origin that rebinds its name to this address reads neither `/metrics`,
//! `/readyz`, `/healthz` nor the resource metadata. The rule is rmcp's: an entry without a port
//! allows that host on any port, one with a port only that port; an empty list allows all.

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
    if allowed.is_empty() {
        return true;
    }
    let Some((h, port)) = split(host) else {
        return false;
    };
    allowed.iter().filter_map(|a| split(a)).any(|(ah, ap)| {
        ah == h
            && match ap {
                Some(p) => port == Some(p),
                None => true,
            }
    })
}

/// The middleware: 403 for a `Host` outside the list (400 without one).
pub async fn check_host(
    State(list): State<Arc<Vec<String>>>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if allowed(&h, &list) => next.run(req).await,
        Some(_) => (StatusCode::FORBIDDEN, "Host not allowed\n").into_response(),
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
}
