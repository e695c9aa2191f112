//! The one request a gate carries per connection, read strictly and written back canonically.
//!
//! A gate forwards what it decided on, never the jail's bytes: the head is parsed here (by
//! `httparse`, after a byte-level check stricter than any proxy's), judged, and a new head is
//! written from the parsed values ([`Request::for_proxy`], [`Request::for_origin`]). Whatever a
//! parser downstream would read differently is refused with 400 before anything is sent:
//! control characters, tabs, bare CR or LF, folded header lines, non-ASCII bytes, userinfo,
//! a `Host` that differs from the target, non-canonical ports and IPv4 forms, a second `Host`
//! or `Content-Length`, and `Transfer-Encoding` (a body is carried by its length only, so where
//! the request ends is never a matter of interpretation).

use std::net::{Ipv4Addr, Ipv6Addr};

use bulkhead_vocab::HostPort;

/// Headers a request may have.
pub(crate) const MAX_HEADERS: usize = 64;

/// The header a gate labels its requests to the instance's proxy with: squid's policy allows a
/// labelled request only to its connector's own `egress` (`proxy::squid_policy`, whose constant
/// this is).
pub use bulkhead_lang::emit::deploy::proxy::CONNECTOR_HEADER;

/// Headers never carried end to end: hop-by-hop ones, those the gate writes itself, and the
/// label (a jail cannot choose its connector).
const DROPPED: &[&str] = &[
    "host",
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "bulkhead-connector",
];

/// What a request asks the gate to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// An absolute-form `http://` request, forwarded once.
    Forward {
        /// The method (an upper-case token).
        method: String,
        /// Path and query, from `/`.
        path: String,
    },
}

/// One parsed request head.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    /// Where it goes: a lower-case name or canonical address, and a port.
    pub target: HostPort,
    /// Whether the host is an IPv6 address (written in brackets).
    v6: bool,
    /// Tunnel or forward.
    pub kind: Kind,
    /// The end-to-end headers, in order, as sent.
    headers: Vec<(String, String)>,
    /// Body bytes that follow the head (`Content-Length`; none without it).
    pub body: u64,
}

/// Why a request head is refused (the text of the 400).
type Refusal = String;

/// Parses `head` (up to and including the blank line).
pub(crate) fn parse(head: &[u8]) -> Result<Request, Refusal> {
    check_bytes(head)?;
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Ok(_) => return Err("the request head is incomplete".into()),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(format!(
                "limit reached: more than {MAX_HEADERS} header lines"
            ));
        }
        Err(e) => return Err(format!("the request head is malformed: {e}")),
    }
    let (Some(method), Some(uri)) = (req.method, req.path) else {
        return Err("no request line".into());
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("`{method}` is not a method"));
    }
    let (target, v6, kind) = if method == "CONNECT" {
        let (host, v6, port) = authority(uri, None)?;
        (HostPort { host, port }, v6, Kind::Connect)
    } else if let Some(rest) = uri.strip_prefix("http://") {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (auth, path) = rest.split_at(end);
        let (host, v6, port) = authority(auth, Some(80))?;
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        if path.contains(['#', '\\']) {
            return Err("a request target holds `#` or `\\`".into());
        }
        (
            HostPort { host, port },
            v6,
            Kind::Forward {
                method: method.to_string(),
                path,
            },
        )
    } else if uri.to_ascii_lowercase().starts_with("https://") {
        return Err("an https:// target goes through CONNECT".into());
    } else {
        return Err(format!(
            "only CONNECT and absolute http:// requests pass a proxy (got `{method} {uri}`)"
        ));
    };
    let mut hosts = 0;
    let mut body = None;
    let mut headers = Vec::new();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        // Checked to be visible ASCII, space and tab above.
        let value = String::from_utf8_lossy(h.value).trim().to_string();
        match name.as_str() {
            "host" => {
                hosts += 1;
                let (host, _, port) = authority(&value, Some(default_port(&kind, &target)))
                    .map_err(|why| format!("`Host: {value}`: {why}"))?;
                if host != target.host || port != target.port {
                    return Err(format!(
                        "`Host: {value}` differs from the request target {}",
                        authority_of(&target, v6)
                    ));
                }
            }
            "transfer-encoding" => {
                return Err(
                    "`Transfer-Encoding` is not carried: send the body with a `Content-Length`"
                        .into(),
                );
            }
            "content-length" => {
                if body.is_some() {
                    return Err("more than one `Content-Length`".into());
                }
                if value.is_empty()
                    || value.len() > 19
                    || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(format!("`Content-Length: {value}` is not a length"));
                }
                body = Some(value.parse::<u64>().map_err(|e| e.to_string())?);
            }
            _ => {}
        }
        if hosts > 1 {
            return Err("more than one `Host`".into());
        }
        if !DROPPED.contains(&name.as_str()) {
            headers.push((h.name.to_string(), value));
        }
    }
    if kind == Kind::Connect && body.is_some_and(|b| b > 0) {
        return Err("a CONNECT request has no body".into());
    }
    Ok(Request {
        target,
        v6,
        kind,
        headers,
        body: body.unwrap_or(0),
    })
}

fn default_port(kind: &Kind, target: &HostPort) -> u16 {
    match kind {
        Kind::Connect => target.port,
        Kind::Forward { .. } => 80,
    }
}

/// Every byte visible ASCII, space, tab or a CR LF pair; no tab in the request line; no header
/// line that starts with white space (obsolete folding).
fn check_bytes(head: &[u8]) -> Result<(), Refusal> {
    for (i, &b) in head.iter().enumerate() {
        let ok = match b {
            b'\r' => head.get(i + 1) == Some(&b'\n'),
            b'\n' => i > 0 && head[i - 1] == b'\r',
            b'\t' | 0x20..=0x7e => true,
            _ => false,
        };
        if !ok {
            return Err(format!(
                "byte {b:#04x} at offset {i} is not carried (control character, bare CR or LF, or not ASCII)"
            ));
        }
    }
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(head.len());
    let line = &head[..line_end];
    if line.contains(&b'\t') || line.windows(2).any(|w| w == b"  ") || line.starts_with(b" ") {
        return Err("the request line holds a tab or more than one space between its parts".into());
    }
    if head
        .windows(3)
        .any(|w| w[0] == b'\n' && (w[1] == b' ' || w[1] == b'\t'))
    {
        return Err("a header line is folded (starts with white space)".into());
    }
    Ok(())
}

/// `host[:port]` → (canonical host, whether IPv6, port). `default` is the port when none is
/// written (`None`: a port is required).
fn authority(s: &str, default: Option<u16>) -> Result<(String, bool, u16), Refusal> {
    if s.contains('@') {
        return Err(format!("`{s}` holds userinfo (`@`)"));
    }
    let (host, port, v6) = if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{s}`: an unclosed `[`"))?;
        let ip: Ipv6Addr = inner
            .parse()
            .map_err(|_| format!("`{inner}` is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("`{s}`: text after `]`"))?,
            ),
        };
        (ip.to_string(), port, true)
    } else {
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        (name(host)?, port, false)
    };
    let port = match (port, default) {
        (Some(p), _) => canonical_port(p)?,
        (None, Some(d)) => d,
        (None, None) => return Err(format!("`{s}` names no port")),
    };
    Ok((host, v6, port))
}

/// A DNS name (lower-cased) or a canonical dotted IPv4 address.
fn name(host: &str) -> Result<String, Refusal> {
    let labels_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !labels_ok {
        return Err(format!("`{host}` is not a host name"));
    }
    // A last label that starts with a digit or `0x` is read as an address by some parsers
    // (`127.1`, `0x7f.1`, `2130706433`): it must be one, written canonically.
    let last = host.rsplit('.').next().unwrap_or(host);
    let numeric =
        last.bytes().all(|b| b.is_ascii_digit()) || last.to_ascii_lowercase().starts_with("0x");
    if numeric {
        let ip: Ipv4Addr = host
            .parse()
            .map_err(|_| format!("`{host}` is not a canonical IPv4 address"))?;
        if ip.to_string() != host {
            return Err(format!("`{host}` is not a canonical IPv4 address"));
        }
    }
    Ok(host.to_ascii_lowercase())
}

/// `1`–`65535` in decimal, no sign, no leading zero.
fn canonical_port(p: &str) -> Result<u16, Refusal> {
    let ok = !p.is_empty()
        && p.len() <= 5
        && p.bytes().all(|b| b.is_ascii_digit())
        && !p.starts_with('0');
    ok.then(|| p.parse::<u16>().ok())
        .flatten()
        .ok_or_else(|| format!("`{p}` is not a port (1 to 65535, no leading zero)"))
}

fn authority_of(target: &HostPort, v6: bool) -> String {
    if v6 {
        format!("[{}]:{}", target.host, target.port)
    } else {
        target.to_string()
    }
}

impl Request {
    /// `host:port` as a request target writes it.
    pub(crate) fn authority(&self) -> String {
        authority_of(&self.target, self.v6)
    }

    /// The `Host` value: the port left out when it is the default.
    fn host_header(&self) -> String {
        match (&self.kind, self.target.port) {
            (Kind::Forward { .. }, 80) if self.v6 => format!("[{}]", self.target.host),
            (Kind::Forward { .. }, 80) => self.target.host.clone(),
            _ => self.authority(),
        }
    }

    fn push_headers(&self, out: &mut String) {
        for (name, value) in &self.headers {
            out.push_str(name);
            out.push_str(": ");
            out.push_str(value);
            out.push_str("\r\n");
        }
    }

    /// The head sent to the instance's proxy, labelled with `connector`.
    pub(crate) fn for_proxy(&self, connector: &str) -> Vec<u8> {
        let mut out = match &self.kind {
            Kind::Connect => format!("CONNECT {} HTTP/1.1\r\n", self.authority()),
            Kind::Forward { method, path } => {
                format!("{method} http://{}{path} HTTP/1.1\r\n", self.host_header())
            }
        };
        out.push_str(&format!("Host: {}\r\n", self.host_header()));
        if matches!(self.kind, Kind::Forward { .. }) {
            self.push_headers(&mut out);
            out.push_str("Connection: close\r\n");
        }
        out.push_str(&format!("{CONNECTOR_HEADER}: {connector}\r\n\r\n"));
        out.into_bytes()
    }

    /// The head sent to the destination itself (a forwarded request, origin-form).
    pub(crate) fn for_origin(&self) -> Vec<u8> {
        let Kind::Forward { method, path } = &self.kind else {
            return Vec::new();
        };
        let mut out = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
            self.host_header()
        );
        self.push_headers(&mut out);
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(s: &str) -> Result<(String, bool), String> {
        parse(s.as_bytes()).map(|r| (r.target.to_string(), r.kind == Kind::Connect))
    }

    #[test]
    fn targets() {
        assert_eq!(
            target("CONNECT example.com:443 HTTP/1.1\r\n\r\n"),
            Ok(("example.com:443".into(), true))
        );
        assert_eq!(
            target("GET http://Example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n"),
            Ok(("example.com:80".into(), false))
        );
        assert_eq!(
            target("GET http://h.test:8080?q HTTP/1.1\r\n\r\n"),
            Ok(("h.test:8080".into(), false))
        );
        assert!(target("GET /x HTTP/1.1\r\n\r\n").is_err());
        assert!(target("CONNECT example.com HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn what_another_parser_could_read_differently_is_refused() {
        for bad in [
            // userinfo: the gate and squid read different hosts
            "CONNECT docs.example.com@hooks.example.com:443 HTTP/1.1\r\n\r\n",
            "CONNECT hooks.example.com:443@docs.example.com:443 HTTP/1.1\r\n\r\n",
            "GET http://docs.example.com@hooks.example.com/ HTTP/1.1\r\n\r\n",
            // white space and control characters in the request line
            "GET\thttp://hooks.example.com/ http://docs.example.com/ HTTP/1.1\r\n\r\n",
            "GET http://docs.example.com/\thttp://hooks.example.com/ HTTP/1.1\r\n\r\n",
            "GET  http://docs.example.com/ HTTP/1.1\r\n\r\n",
            "GET http://docs.example.com/\x00 HTTP/1.1\r\n\r\n",
            // bare LF, bare CR, folding
            "GET http://docs.example.com/ HTTP/1.1\nHost: hooks.example.com\r\n\r\n",
            "GET http://docs.example.com/ HTTP/1.1\r\nX: a\rHost: hooks.example.com\r\n\r\n",
            "GET http://docs.example.com/ HTTP/1.1\r\nX: a\r\n Host: hooks.example.com\r\n\r\n",
            // a Host that is not the target, or two
            "GET http://docs.example.com/ HTTP/1.1\r\nHost: hooks.example.com\r\n\r\n",
            "GET http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\nHost: hooks.example.com\r\n\r\n",
            "CONNECT docs.example.com:443 HTTP/1.1\r\nHost: hooks.example.com:443\r\n\r\n",
            // non-canonical ports and addresses
            "CONNECT docs.example.com:0443 HTTP/1.1\r\n\r\n",
            "CONNECT docs.example.com:+443 HTTP/1.1\r\n\r\n",
            "CONNECT docs.example.com:65536 HTTP/1.1\r\n\r\n",
            "CONNECT docs.example.com: HTTP/1.1\r\n\r\n",
            "CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
            "CONNECT 0x7f.0.0.1:443 HTTP/1.1\r\n\r\n",
            "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n",
            "CONNECT docs.example.com.:443 HTTP/1.1\r\n\r\n",
            "CONNECT docs%2eexample.com:443 HTTP/1.1\r\n\r\n",
            // where the body ends must not be a matter of interpretation
            "POST http://docs.example.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://docs.example.com/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "POST http://docs.example.com/ HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
            "GET http://docs.example.com/#x HTTP/1.1\r\n\r\n",
            "GET https://docs.example.com/ HTTP/1.1\r\n\r\n",
            "get http://docs.example.com/ HTTP/1.1\r\n\r\n",
            "GET http://docs.example.com/ HTTP/1.1\r\nX: \u{e9}\r\n\r\n",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "accepted: {bad:?}");
        }
    }

    #[test]
    fn the_head_sent_on_is_written_from_what_was_decided() {
        let r = parse(
            b"POST http://Docs.Example.com/a?b HTTP/1.1\r\nHost: docs.example.com:80\r\nContent-Length: 3\r\nProxy-Authorization: x\r\nBulkhead-Connector: other\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, 3);
        assert_eq!(
            String::from_utf8(r.for_proxy("fetch")).unwrap(),
            "POST http://docs.example.com/a?b HTTP/1.1\r\nHost: docs.example.com\r\nContent-Length: 3\r\nAccept: */*\r\nConnection: close\r\nBulkhead-Connector: fetch\r\n\r\n"
        );
        assert_eq!(
            String::from_utf8(r.for_origin()).unwrap(),
            "POST /a?b HTTP/1.1\r\nHost: docs.example.com\r\nContent-Length: 3\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let c = parse(b"CONNECT DOCS.example.com:443 HTTP/1.1\r\nUser-Agent: x\r\n\r\n").unwrap();
        assert_eq!(
            String::from_utf8(c.for_proxy("fetch")).unwrap(),
            "CONNECT docs.example.com:443 HTTP/1.1\r\nHost: docs.example.com:443\r\nBulkhead-Connector: fetch\r\n\r\n"
        );
    }
}
