//! The reviewed part of `config.yaml`, read through the runtime's own types: the engine's
//! configuration schema (`config.schema.json`, derived from those types and kept equal to them
//! by a test) names each setting's review class (`x-review`) and default, so every key the
//! runtime reads is either policy with a safe direction or neutral, and none is unknown here.
//! Values keep their `${VAR:-default}` text resolved to the default, so the review does not
//! depend on the reviewer's environment; the text as written is kept beside it.

use serde_json::Value;
use std::collections::BTreeMap;

/// The engine's `config.yaml` schema, as `bulkhead::config::schema()` makes it (the engine's
/// `config_schema` test keeps this copy equal).
pub const CONFIG_SCHEMA: &str = include_str!("config.schema.json");

/// How a change of one setting is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Any change passes (timeouts, cache sizes, batching).
    Neutral,
    /// A number (or every number under it): larger admits more.
    LargerIsLooser,
    /// A number: smaller admits more (a free-space reserve, evidence kept).
    SmallerIsLooser,
    /// Any change counts (who is trusted, where things live or go, key material).
    Changed,
    /// A list of what is admitted: an addition, a wildcard or emptying it widens.
    Allowlist,
    /// A scope a permission requires: changing or dropping a required one loosens.
    Scope,
    /// `environment`: leaving `production` loosens.
    Environment,
    /// A switch that protects when on.
    OnIsSafer,
    /// A rate limit (`calls` per `per_seconds`, `burst`): more calls per second, a larger
    /// burst, or none at all loosens.
    Budget,
}

impl Class {
    fn parse(s: &str) -> Option<Class> {
        Some(match s {
            "neutral" => Class::Neutral,
            "larger-is-looser" => Class::LargerIsLooser,
            "smaller-is-looser" => Class::SmallerIsLooser,
            "changed" => Class::Changed,
            "allowlist" => Class::Allowlist,
            "scope" => Class::Scope,
            "environment" => Class::Environment,
            "on-is-safer" => Class::OnIsSafer,
            "budget" => Class::Budget,
            _ => return None,
        })
    }
}

/// One setting of `config.yaml` at a dotted path (`http.max_body_bytes`,
/// `mcp_servers.template.url`), with the value the runtime uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// How a change is judged.
    pub class: Class,
    /// The value in effect: the file's, resolved, or the runtime's default; key material is a
    /// fingerprint.
    pub value: Value,
    /// The file's text when it holds a variable reference (`${BULKHEAD_AUDIENCE:-bulkhead}`), so a
    /// variable renamed or replaced by a literal shows although both resolve alike.
    pub written: Option<String>,
    /// Whether the file sets it (else the value is the runtime's default).
    pub set: bool,
}

/// What `config.yaml` says, setting by setting (absent file: the runtime's defaults).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Identity {
    /// Whether there is a `config.yaml` at all.
    pub present: bool,
    /// Every classified setting, by dotted path.
    pub settings: BTreeMap<String, Setting>,
    /// Keys the file sets that the schema does not classify (or does not know): any change of
    /// one fails the review.
    pub unclassified: BTreeMap<String, Value>,
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

/// A fingerprint of key material: a change still shows, the material does not.
fn fingerprint(s: &str) -> String {
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("(fingerprint {h:016x})")
}

/// Key material as written: each `${VAR:-default}` keeps its variable and fingerprints its
/// default (a renamed variable reads as one), and a literal is a fingerprint.
fn redact_written(s: &str) -> String {
    let refs = crate::vars::references(&Value::String(s.to_string()));
    if refs.is_empty() {
        return fingerprint(s);
    }
    let mut out = s.to_string();
    for r in refs {
        if !r.arg.is_empty() {
            let shown = format!("${{{}{}{}}}", r.name, r.op, fingerprint(&r.arg));
            out = out.replacen(&r.written(), &shown, 1);
        }
    }
    out
}

/// Whether the value at key `k` is key material.
fn is_secret_key(k: &str) -> bool {
    matches!(
        k,
        "secret" | "key" | "pem" | "public_key" | "public_key_pem"
    )
}

/// [`redact_secrets`] for text as written.
fn redact_written_secrets(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(s) if is_secret_key(k) => *x = Value::String(redact_written(s)),
                    _ => redact_written_secrets(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_written_secrets),
        _ => {}
    }
}

/// Key material (`secret`, `key`, `pem`, `public_key_pem` values) shown as a fingerprint.
fn redact_secrets(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(s) if is_secret_key(k) => {
                        *x = Value::String(fingerprint(s));
                    }
                    _ => redact_secrets(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_secrets),
        _ => {}
    }
}

/// The text of a value that holds a variable reference, as written (key material's defaults
/// fingerprinted). `secret`: the value itself is key material.
fn written(raw: &Value, secret: bool) -> Option<String> {
    let text = match raw {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    };
    text.contains("${").then(|| {
        let mut v = raw.clone();
        redact_written_secrets(&mut v);
        match v {
            Value::String(s) if secret => redact_written(&s),
            Value::String(s) => s,
            other => other.to_string(),
        }
    })
}

/// The schema and its definitions, parsed once.
fn schema() -> &'static Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(CONFIG_SCHEMA).expect("the engine's schema is JSON"))
}

/// `node` with `$ref` followed and an `Option`'s `anyOf [T, null]` reduced to `T`, keeping the
/// node's own `x-review` and `default`.
fn deref<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let mut n = node;
    for _ in 0..16 {
        if let Some(r) = n.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or("");
            match root["$defs"].get(name) {
                Some(d) => n = d,
                None => return n,
            }
        } else if let Some(list) = n.get("anyOf").and_then(Value::as_array) {
            let not_null: Vec<&Value> = list
                .iter()
                .filter(|x| x.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            match not_null.as_slice() {
                [one] => n = one,
                _ => return n,
            }
        } else {
            return n;
        }
    }
    n
}

/// Every setting path the schema describes, with its class (`None`: a leaf without one).
/// `*` stands for a map's key, as in `mcp_servers.*.url`.
pub fn schema_settings(schema: &Value) -> BTreeMap<String, Option<Class>> {
    fn walk(root: &Value, node: &Value, path: &str, out: &mut BTreeMap<String, Option<Class>>) {
        if let Some(c) = node.get("x-review").and_then(Value::as_str) {
            out.insert(path.to_string(), Class::parse(c));
            return;
        }
        let n = deref(root, node);
        if let Some(c) = n.get("x-review").and_then(Value::as_str) {
            out.insert(path.to_string(), Class::parse(c));
            return;
        }
        let props = n.get("properties").and_then(Value::as_object);
        let map = n.get("additionalProperties").filter(|a| a.is_object());
        if props.is_none() && map.is_none() {
            out.insert(path.to_string(), None);
            return;
        }
        for (k, v) in props.into_iter().flatten() {
            walk(root, v, &join(path, k), out);
        }
        if let Some(m) = map {
            walk(root, m, &join(path, "*"), out);
        }
    }
    let mut out = BTreeMap::new();
    walk(schema, schema, "", &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Walks the schema beside the file's value (`raw`, as written) and the default the schema
/// gives, recording each setting.
fn read(
    root: &Value,
    node: &Value,
    path: &str,
    raw: Option<&Value>,
    default: Option<&Value>,
    id: &mut Identity,
) {
    let class = node
        .get("x-review")
        .or_else(|| deref(root, node).get("x-review"))
        .and_then(Value::as_str);
    let n = deref(root, node);
    let default = node.get("default").or(n.get("default")).or(default);
    let raw = raw.filter(|v| !v.is_null());
    if let Some(c) = class {
        let Some(class) = Class::parse(c) else {
            if let Some(v) = raw {
                id.unclassified.insert(path.to_string(), v.clone());
            }
            return;
        };
        let mut value = raw.map_or_else(|| default.cloned().unwrap_or(Value::Null), resolved);
        redact_secrets(&mut value);
        let secret = path.rsplit('.').next().is_some_and(is_secret_key);
        if secret && let Value::String(s) = &value {
            value = Value::String(fingerprint(s));
        }
        id.settings.insert(
            path.to_string(),
            Setting {
                class,
                value,
                written: raw.and_then(|r| written(r, secret)),
                set: raw.is_some(),
            },
        );
        return;
    }
    let props = n.get("properties").and_then(Value::as_object);
    let map = n.get("additionalProperties").filter(|a| a.is_object());
    let obj = raw.and_then(Value::as_object);
    if props.is_none() && map.is_none() {
        if let Some(v) = raw {
            id.unclassified.insert(path.to_string(), v.clone());
        }
        return;
    }
    for (k, v) in props.into_iter().flatten() {
        let d = default.and_then(|d| d.get(k));
        read(root, v, &join(path, k), obj.and_then(|o| o.get(k)), d, id);
    }
    for (k, v) in obj.into_iter().flatten() {
        if props.is_some_and(|p| p.contains_key(k)) {
            continue;
        }
        match map {
            Some(m) => read(root, m, &join(path, k), Some(v), None, id),
            None => {
                id.unclassified.insert(join(path, k), v.clone());
            }
        }
    }
}

impl Identity {
    /// The reviewed view of a parsed `config.yaml` (None: there is none).
    pub fn of(config: Option<&Value>) -> Identity {
        let root = schema();
        let mut id = Identity {
            present: config.is_some(),
            ..Identity::default()
        };
        read(root, root, "", config, None, &mut id);
        id
    }

    /// The resolved value of the setting at `path`, if the file sets it.
    pub fn set_value(&self, path: &str) -> Option<&Value> {
        self.settings.get(path).filter(|s| s.set).map(|s| &s.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_of_the_engines_schema_has_a_class() {
        let unclassified: Vec<String> = schema_settings(schema())
            .into_iter()
            .filter(|(_, c)| c.is_none())
            .map(|(p, _)| p)
            .collect();
        assert!(unclassified.is_empty(), "{unclassified:?}");
    }

    /// A key added to the types without a class is found by the walk (the engine's test fails
    /// on it), and a file that sets it is reviewed as unclassified (any change fails).
    #[test]
    fn a_setting_without_a_class_is_found_and_fails_closed() {
        let mut s: Value = serde_json::from_str(CONFIG_SCHEMA).unwrap();
        s["$defs"]["HttpConfig"]["properties"]["new_knob"] =
            serde_json::json!({ "type": "integer", "default": 1 });
        let missing: Vec<String> = schema_settings(&s)
            .into_iter()
            .filter(|(_, c)| c.is_none())
            .map(|(p, _)| p)
            .collect();
        assert_eq!(missing, ["http.new_knob"]);
        let mut id = Identity::default();
        let file = serde_json::json!({ "http": { "new_knob": 5 } });
        read(&s, &s, "", Some(&file), None, &mut id);
        assert_eq!(
            id.unclassified.get("http.new_knob"),
            Some(&serde_json::json!(5))
        );
    }

    #[test]
    fn defaults_fill_what_the_file_leaves_out_and_unknown_keys_are_kept() {
        let file: Value = serde_json::json!({
            "http": { "max_body_bytes": 1000, "surprise": 1 },
            "auth": { "issuer": "${ISS:-me}", "audience": "a" },
        });
        let id = Identity::of(Some(&file));
        let body = &id.settings["http.max_body_bytes"];
        assert!(body.set && body.value == serde_json::json!(1000));
        let hosts = &id.settings["http.allowed_hosts"];
        assert!(!hosts.set && hosts.value.as_array().is_some_and(|a| !a.is_empty()));
        assert_eq!(id.settings["auth.issuer"].value, "me");
        assert_eq!(
            id.settings["auth.issuer"].written.as_deref(),
            Some("${ISS:-me}")
        );
        assert!(
            id.unclassified.contains_key("http.surprise"),
            "{:?}",
            id.unclassified
        );
    }
}
