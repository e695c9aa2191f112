//! The `http` connector: requests against one declared base URL. Path placeholders are filled
//! segment by segment (percent-encoded), declared params go to the query or a JSON body,
//! redirects are refused, only allowed `host:port`s are reached, and the body is read under a cap.

use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Method, StatusCode, Url};
use serde_json::Value;

use super::{ConnectorError, settings};
use crate::errors::ToolError;
use crate::server::{JsonObject, ToolOutput, ToolResult};
use crate::signals::{CallSignals, Unit};
use crate::tooldef::ConnectorDef;
use bulkhead_vocab::connector::HttpSettings;
use bulkhead_vocab::connector::OperationBody;

/// A built `http` connector: base URL, allowed hosts, limits and one pooled client.
pub struct Http {
    name: &'static str,
    base: Url,
    allowed: Vec<String>,
    timeout_ms: u64,
    max_bytes: u64,
    client: Client,
    /// The parameter sent as `Authorization: Bearer` (bound to the caller's token).
    bearer_param: Option<String>,
    /// The special-purpose ranges its spec opens (`reach_private`).
    opened: Vec<bulkhead_vocab::ranges::Cidr>,
}

/// `host:port` of a URL, with the scheme's default port filled in.
fn host_port(url: &Url) -> Option<String> {
    let host = url.host_str()?.to_ascii_lowercase();
    Some(format!("{host}:{}", url.port_or_known_default()?))
}

/// `host` or `host:port` (IPv6 in brackets) as `host:port`, lowercased.
fn with_port(entry: &str, default_port: u16) -> String {
    let h = entry.trim().to_ascii_lowercase();
    if let Some((host, port)) = h.rsplit_once(':') {
        let numeric = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
        if numeric && (!host.contains(':') || host.starts_with('[')) {
            return h;
        }
    }
    format!("{h}:{default_port}")
}

impl Http {
    /// Reads the settings and builds the client (no redirects, total timeout).
    pub fn new(def: &'static ConnectorDef, s: HttpSettings) -> Result<Http, ConnectorError> {
        let err = |reason: String| ConnectorError::Settings {
            connector: def.name,
            reason,
        };
        let base = Url::parse(&s.base_url)
            .map_err(|e| err(format!("settings.base_url is not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(err("settings.base_url must be an http(s) URL".into()));
        }
        let default =
            host_port(&base).ok_or_else(|| err("settings.base_url has no host".into()))?;
        let allowed = match &s.allowed_hosts {
            None => vec![default],
            Some(hosts) => {
                let port = base.port_or_known_default().unwrap_or(443);
                hosts.iter().map(|h| with_port(h, port)).collect()
            }
        };
        let mut headers = HeaderMap::new();
        for (k, v) in s.headers.iter().flatten() {
            if v.is_empty() {
                continue; // an optional credential that is not set (`${TOKEN:-}`) is not sent
            }
            let name = HeaderName::try_from(k.as_str())
                .map_err(|_| err(format!("settings.headers: `{k}` is not a header name")))?;
            let mut value = HeaderValue::try_from(v.as_str())
                .map_err(|_| err(format!("settings.headers.{k}: not a valid header value")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let timeout_ms = s.timeout_ms().map_err(settings::invalid(def))?;
        let opened = s.reach_private().map_err(settings::invalid(def))?;
        let mut builder = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(timeout_ms))
            .default_headers(headers);
        // Without a proxy the connector resolves its destinations itself: each is judged by
        // the addresses it resolves to. Through a proxy it resolves only the proxy's name.
        if crate::config::env::egress_proxy_in(&crate::config::env_lookup).is_none() {
            builder = builder.dns_resolver(super::public_only::PublicOnly {
                opened: opened.clone(),
            });
        }
        // An internal CA replaces the system's roots (not added to them): the connector then
        // trusts exactly what its operator named. Proxies come from HTTPS_PROXY/HTTP_PROXY/
        // NO_PROXY (reqwest reads them; a proxied instance is given its egress proxy there).
        if let Some(path) = s.ca_file.as_deref().filter(|p| !p.is_empty()) {
            let pem = std::fs::read(path)
                .map_err(|e| err(format!("settings.ca_file `{path}` cannot be read: {e}")))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                err(format!(
                    "settings.ca_file `{path}` holds no PEM certificates: {e}"
                ))
            })?;
            if certs.is_empty() {
                return Err(err(format!(
                    "settings.ca_file `{path}` holds no PEM certificates"
                )));
            }
            builder = builder.tls_certs_only(certs);
        }
        let client = builder
            .build()
            .map_err(|e| err(format!("cannot build the HTTP client: {e}")))?;
        Ok(Http {
            name: def.name,
            base,
            allowed,
            timeout_ms,
            max_bytes: s.max_response_bytes().map_err(settings::invalid(def))?,
            client,
            bearer_param: s.bearer_param,
            opened,
        })
    }

    /// Sends the operation's request and reads the response under the size cap.
    /// Progress counts body bytes against `Content-Length` when the server sends one; a cancelled
    /// call drops this future and with it the connection.
    pub async fn run(
        &self,
        body: &OperationBody,
        args: JsonObject,
        signals: &CallSignals,
    ) -> ToolResult {
        let OperationBody::Http {
            method,
            path,
            query,
            body,
            headers,
            renames,
        } = body
        else {
            return Err(ToolError::bug("not an http operation"));
        };
        // The service's name of a parameter (`upstream`), or the spec's.
        let theirs = |k: &str| -> String {
            renames
                .iter()
                .find(|(ours, _)| ours == k)
                .map_or_else(|| k.to_owned(), |(_, t)| t.clone())
        };
        let url = self.url(path, query, &theirs, &args)?;
        let target = host_port(&url).unwrap_or_default();
        if !self.allowed.contains(&target) {
            return Err(ToolError::fatal(format!(
                "connector `{}` may not reach {target} (not in allowed_hosts)",
                self.name
            )));
        }
        // An address written in the URL is judged as written (no resolver sees it).
        if let Some(why) = super::public_only::literal_refused(url.as_str(), &self.opened) {
            return Err(ToolError::fatal(format!(
                "connector `{}` may not reach {target}: {why}",
                self.name
            )));
        }
        let method = Method::from_bytes(method.as_str().as_bytes())
            .map_err(|_| ToolError::bug(format!("bad HTTP method `{}`", method.as_str())))?;
        let mut req = self.client.request(method, url);
        // The caller's own credential (bound by the call wrapper, never the model's), only in
        // the header: the path, query and body never carry it.
        if let Some(param) = &self.bearer_param
            && let Some(token) = args.get(param).and_then(Value::as_str)
        {
            req = req.bearer_auth(token);
        }
        for key in headers {
            let Some(v) = args.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            let value = reqwest::header::HeaderValue::from_str(&scalar(v)).map_err(|_| {
                ToolError::retry(format!(
                    "`{key}` cannot be sent as a header: control characters are not allowed"
                ))
            })?;
            req = req.header(theirs(key), value);
        }
        if !body.is_empty() {
            let obj: JsonObject = body
                .iter()
                .filter_map(|k| args.get(k).map(|v| (theirs(k), v.clone())))
                .collect();
            let bytes = serde_json::to_vec(&obj).map_err(ToolError::bug)?;
            req = req.header(CONTENT_TYPE, "application/json").body(bytes);
        }
        let mut resp = req.send().await.map_err(|e| self.transport(&target, e))?;
        let status = resp.status();
        // The egress proxy of a proxied instance refusing a target (squid marks its own error
        // pages): a policy refusal, not the service's answer, and retrying cannot help.
        if let Some(why) = resp.headers().get("x-squid-error") {
            return Err(ToolError::fatal(format!(
                "the egress proxy refused {target} ({}): it is not on this instance's allowlist",
                why.to_str().unwrap_or("denied")
            )));
        }
        if status.is_redirection() {
            return Err(ToolError::fatal(format!(
                "{target} answered with a redirect (HTTP {}), which connector `{}` does not follow",
                status.as_u16(),
                self.name
            )));
        }
        let is_json = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("json"));
        let declared_len = resp
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let too_large = || {
            ToolError::retry(format!(
                "response larger than {} bytes; narrow the request",
                self.max_bytes
            ))
        };
        if status.is_success() && declared_len.is_some_and(|n| n > self.max_bytes) {
            return Err(too_large());
        }
        // Error bodies are read only far enough for an excerpt.
        let cap = if status.is_success() {
            self.max_bytes
        } else {
            512
        };
        if status.is_success() {
            signals.set_total(Unit::Bytes, declared_len);
        }
        let mut buf = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport(&target, e))? {
            signals.advance(chunk.len() as u64);
            if buf.len() as u64 + chunk.len() as u64 > cap {
                if status.is_success() {
                    return Err(too_large());
                }
                buf.extend_from_slice(&chunk[..(cap as usize).saturating_sub(buf.len())]);
                break;
            }
            buf.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let secret = self
                .bearer_param
                .as_ref()
                .and_then(|p| args.get(p))
                .and_then(Value::as_str);
            return Err(status_error(status, &buf, secret));
        }
        if is_json && let Ok(v) = serde_json::from_slice::<Value>(&buf) {
            return Ok(ToolOutput::Json(v));
        }
        Ok(ToolOutput::Text(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// The base URL with the path template appended segment by segment and query params added.
    fn url(
        &self,
        template: &str,
        query: &[String],
        theirs: &dyn Fn(&str) -> String,
        args: &JsonObject,
    ) -> Result<Url, ToolError> {
        let mut url = self.base.clone();
        {
            let mut segs = url
                .path_segments_mut()
                .map_err(|_| ToolError::bug("base URL cannot take a path"))?;
            segs.pop_if_empty();
            for seg in template.split('/').filter(|s| !s.is_empty()) {
                let filled = fill(seg, args)?;
                if filled.is_empty() || filled == "." || filled == ".." {
                    return Err(ToolError::retry(format!(
                        "path segment `{seg}` may not be empty, `.` or `..`"
                    )));
                }
                segs.push(&filled);
            }
        }
        for key in query {
            let values: Vec<String> = match args.get(key) {
                None | Some(Value::Null) => continue,
                Some(Value::Array(items)) => items.iter().map(scalar).collect(),
                Some(v) => vec![scalar(v)],
            };
            let name = theirs(key);
            for v in values {
                url.query_pairs_mut().append_pair(&name, &v);
            }
        }
        Ok(url)
    }

    /// A request that never got an answer. The network being down or slow is retryable (a name
    /// that does not resolve, a refused or reset connection, a timeout): the same call may work
    /// in a moment. What retrying cannot change is fatal: the egress proxy refusing the
    /// destination (policy), a certificate the trusted CAs do not vouch for, a build without TLS.
    fn transport(&self, target: &str, e: reqwest::Error) -> ToolError {
        let e = e.without_url();
        if e.is_timeout() {
            return ToolError::retry(format!(
                "{target} did not answer within {} ms; retry later",
                self.timeout_ms
            ));
        }
        if e.is_builder() {
            return ToolError::fatal(format!(
                "cannot send a request to {target} (https needs TLS support in this build)"
            ));
        }
        let why = causes(&e);
        let lower = why.to_ascii_lowercase();
        let policy_or_trust = ["tunnel", "certificate", "tls", "handshake", "unknownissuer"]
            .iter()
            .any(|w| lower.contains(w));
        if e.is_connect() && !policy_or_trust {
            // Not found (DNS), refused, reset, unreachable: the network, not this call.
            ToolError::retry(format!(
                "cannot reach {target} ({why}); retry later (the connector's URL is set by its variable, e.g. WEBHOOK_URL)"
            ))
        } else if e.is_connect() {
            ToolError::fatal(format!("cannot connect to {target}: {why}"))
        } else {
            ToolError::fatal(format!("request to {target} failed: {e}"))
        }
    }
}

/// The error's causes without the request URL (see [`super::error_causes`]).
fn causes(e: &reqwest::Error) -> String {
    let parts = super::error_causes(e);
    if parts.is_empty() {
        "connection failed".to_string()
    } else {
        parts.join(": ")
    }
}

/// Replaces every `{param}` in one path segment with the argument's text.
fn fill(seg: &str, args: &JsonObject) -> Result<String, ToolError> {
    let mut out = String::new();
    let mut rest = seg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| ToolError::bug(format!("unclosed `{{` in path segment `{seg}`")))?;
        let key = &after[..close];
        match args.get(key) {
            Some(v) if !v.is_null() => out.push_str(&scalar(v)),
            _ => {
                return Err(ToolError::retry(format!(
                    "`{key}` is required for the path"
                )));
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// 4xx: the request was wrong (retryable); 5xx and anything else: the service is (fatal).
/// `secret` (the caller's bearer, when the connector sends one) is blanked out of the excerpt: a
/// service that echoes the request must not hand the user's token to the model.
fn status_error(status: StatusCode, body: &[u8], secret: Option<&str>) -> ToolError {
    let mut text = String::from_utf8_lossy(body).into_owned();
    if let Some(secret) = secret.filter(|s| !s.is_empty()) {
        text = text.replace(secret, "<token>");
    }
    let excerpt: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let excerpt: String = excerpt.chars().take(200).collect();
    let msg = if excerpt.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {excerpt}")
    };
    if status.is_client_error() {
        ToolError::retry(msg)
    } else {
        ToolError::fatal(msg)
    }
}
