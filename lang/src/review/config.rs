//! The reviewed part of `config.yaml`: who may call (auth, scopes), from where (hosts, origins)
//! and how much (limits, context presets). Values keep their `${VAR:-default}` text resolved to
//! the default, so the review does not depend on the reviewer's environment.

use serde_json::Value;
use std::collections::BTreeMap;

/// What `config.yaml` says about identity and limits (absent file: the runtime's defaults,
/// shown as such).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Identity {
    /// Whether there is a `config.yaml` at all.
    pub present: bool,
    /// `environment`, resolved.
    pub environment: Option<String>,
    /// `auth`, resolved, as canonical JSON (issuer, audience, keys, JWKS, discovery).
    pub auth: Option<String>,
    /// `auth.scopes.<permission>`, resolved.
    pub scopes: BTreeMap<String, String>,
    /// `http.allowed_hosts` (None: not set, the runtime's default list).
    pub allowed_hosts: Option<Vec<String>>,
    /// `http.allowed_origins` (None: not set, the runtime's default list).
    pub allowed_origins: Option<Vec<String>>,
    /// Every number under `http`, `limits`, `workspace`, `audit` and `context.presets`, by
    /// dotted path (`http.max_sessions_per_identity`, `context.presets.sql_query.max_chars`).
    pub numbers: BTreeMap<String, f64>,
    /// Sections where any change is reviewed (`state`: where the ratchet lives and its trust
    /// domain; `telemetry`: where traces go; `mcp_servers`: the clients' servers and trust), as
    /// canonical JSON, by section; and the keys that stand for policy as written (`environment
    /// (as written)`: `${BULKHEAD_ENV:-development}`), so a variable renamed or replaced by a
    /// literal shows although both resolve alike.
    pub sections: BTreeMap<&'static str, String>,
}

/// `${VAR:-default}` → `default`; `${VAR}` and `${VAR:?m}` stay as written.
fn resolve(s: &str) -> String {
    let refs = crate::vars::references(&Value::String(s.to_string()));
    let mut out = s.to_string();
    for r in refs {
        if let Some(d) = r.default() {
            out = out.replacen(&r.written(), d, 1);
        }
    }
    out
}

fn resolved(v: &Value) -> Value {
    match v {
        Value::String(s) => {
            let r = resolve(s);
            match r.parse::<f64>() {
                Ok(n) if r.chars().all(|c| c.is_ascii_digit() || c == '.') => {
                    serde_json::Number::from_f64(n).map_or(Value::String(r), Value::Number)
                }
                _ => Value::String(r),
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(resolved).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), resolved(v))).collect())
        }
        other => other.clone(),
    }
}

/// Key material in `auth` (`secret`, `key`, `pem` values) is shown as a fingerprint: a change
/// still shows, the material does not.
fn redact_secrets(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(s)
                        if matches!(k.as_str(), "secret" | "key" | "pem" | "public_key") =>
                    {
                        let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                        });
                        *x = Value::String(format!("(fingerprint {h:016x})"));
                    }
                    _ => redact_secrets(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_secrets),
        _ => {}
    }
}

fn numbers(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                out.insert(prefix.to_string(), f);
            }
        }
        // A switch (`audit.chain`) counts as 1 or 0: turning it off is a change like any number's.
        Value::Bool(b) => {
            out.insert(prefix.to_string(), if *b { 1.0 } else { 0.0 });
        }
        Value::Object(m) => {
            for (k, v) in m {
                numbers(&format!("{prefix}.{k}"), v, out);
            }
        }
        _ => {}
    }
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    let list = v?.as_array()?;
    let mut out: Vec<String> = list
        .iter()
        .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

impl Identity {
    /// The reviewed view of a parsed `config.yaml` (None: there is none).
    pub fn of(config: Option<&Value>) -> Identity {
        let Some(raw) = config else {
            return Identity::default();
        };
        let c = resolved(raw);
        let written = [
            ("environment (as written)", &raw["environment"]),
            ("stdio.user (as written)", &raw["stdio"]["user"]),
            ("http.public_url (as written)", &raw["http"]["public_url"]),
            ("auth.issuer (as written)", &raw["auth"]["issuer"]),
            ("auth.audience (as written)", &raw["auth"]["audience"]),
        ];
        let mut id = Identity {
            present: true,
            environment: c
                .get("environment")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..Identity::default()
        };
        if let Some(auth) = c.get("auth") {
            let mut auth = auth.clone();
            if let Some(scopes) = auth.as_object_mut().and_then(|m| m.remove("scopes")) {
                for (k, v) in scopes.as_object().into_iter().flatten() {
                    id.scopes.insert(
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    );
                }
            }
            redact_secrets(&mut auth);
            id.auth = Some(auth.to_string());
        }
        let http = c.get("http");
        id.allowed_hosts = strings(http.and_then(|h| h.get("allowed_hosts")));
        id.allowed_origins = strings(http.and_then(|h| h.get("allowed_origins")));
        for key in ["http", "limits", "workspace", "audit", "rate_limits"] {
            if let Some(v) = c.get(key) {
                numbers(key, v, &mut id.numbers);
            }
        }
        if let Some(p) = c.get("context").and_then(|x| x.get("presets")) {
            numbers("context.presets", p, &mut id.numbers);
        }
        for key in ["state", "telemetry", "mcp_servers"] {
            if let Some(v) = c.get(key) {
                id.sections.insert(key, v.to_string());
            }
        }
        for (key, v) in written {
            if let Some(s) = v.as_str() {
                id.sections.insert(key, s.to_string());
            }
        }
        id
    }
}

/// How a change of the number at `path` is judged: `Some(true)` when a larger value is looser
/// (sizes, counts, timeouts, context limits), `Some(false)` when a smaller one is (a reserve of
/// free space), `None` when any change counts (the audit log's retention and record size).
pub(super) fn larger_is_looser(path: &str) -> Option<bool> {
    if path.starts_with("audit.") || path == "rate_limits.store_timeout_ms" {
        None
    } else if path.starts_with("rate_limits.") && path.ends_with(".per_seconds") {
        // A shorter period admits the same calls sooner.
        Some(false)
    } else {
        Some(!path.ends_with("min_free_bytes"))
    }
}
