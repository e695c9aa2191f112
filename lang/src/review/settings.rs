//! What a change of `config.yaml` weakens: each setting compared by its review class (the
//! engine's schema names it), with the runtime's default standing in where a file is silent.

use super::config::{Class, Identity, Setting};
use super::rule::Rule;
use super::rules::{Review, push};
use bulkhead_vocab::RateLimit;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const FILE: &str = "config.yaml";

/// Compares the settings of two revisions' `config.yaml`.
pub(super) fn compare(b: &Identity, h: &Identity, r: &mut Review) {
    if b.present && !h.present {
        push(
            r,
            Rule::ConfigRemoved,
            FILE.into(),
            "removed: every setting falls back to the runtime's defaults".into(),
            FILE,
        );
        return;
    }
    let paths: BTreeSet<&String> = b.settings.keys().chain(h.settings.keys()).collect();
    for path in paths {
        match (b.settings.get(path), h.settings.get(path)) {
            (Some(o), Some(n)) => setting(path, o, n, r),
            // A map entry on one side only (an `mcp_servers` entry, a preset): added or gone.
            (o, n) => {
                let class = o.or(n).map_or(Class::Changed, |s| s.class);
                let none = Setting {
                    class,
                    value: Value::Null,
                    written: None,
                    set: false,
                };
                setting(path, o.unwrap_or(&none), n.unwrap_or(&none), r);
            }
        }
    }
    let keys: BTreeSet<&String> = b.unclassified.keys().chain(h.unclassified.keys()).collect();
    for key in keys {
        let (o, n) = (b.unclassified.get(key), h.unclassified.get(key));
        if o != n {
            push(
                r,
                Rule::ConfigChanged,
                format!("config.yaml {key}"),
                format!(
                    "{} → {} (a key the review has no class for: the engine does not read it as reviewed)",
                    show(o),
                    show(n)
                ),
                FILE,
            );
        }
    }
}

fn show(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "(none)".into(),
        Some(v) => v.to_string(),
    }
}

/// The rule for a setting whose every change counts: identity under `auth` and
/// `token_service`, the rest under `config-changed`.
fn changed_rule(path: &str) -> Rule {
    if path.starts_with("auth.") || path.starts_with("token_service.") {
        Rule::AuthChanged
    } else {
        Rule::ConfigChanged
    }
}

fn setting(path: &str, o: &Setting, n: &Setting, r: &mut Review) {
    let subject = || format!("config.yaml {path}");
    let class = n.class;
    if o.value == n.value {
        // Same value, other text: a variable renamed or replaced by a literal.
        if class != Class::Neutral && o.written != n.written && (o.set || n.set) {
            let text = |s: &Setting| {
                s.written.clone().unwrap_or_else(|| match &s.value {
                    Value::String(v) => v.clone(),
                    v => v.to_string(),
                })
            };
            push(
                r,
                Rule::ConfigChanged,
                format!("config.yaml {path} (as written)"),
                format!("{} → {}", text(o), text(n)),
                FILE,
            );
        }
        return;
    }
    match class {
        Class::Neutral => {}
        Class::Changed => push(
            r,
            changed_rule(path),
            subject(),
            format!("{} → {}", show(Some(&o.value)), show(Some(&n.value))),
            FILE,
        ),
        Class::Environment => {
            if o.value == "production" && n.value != "production" {
                push(
                    r,
                    Rule::EnvironmentLowered,
                    FILE.into(),
                    format!("production → {}", n.value.as_str().unwrap_or("unset")),
                    FILE,
                );
            }
        }
        Class::Scope => {
            if let Some(scope) = o.value.as_str() {
                push(
                    r,
                    Rule::ScopeDropped,
                    subject(),
                    format!("{scope} → {}", n.value.as_str().unwrap_or("none")),
                    FILE,
                );
            }
        }
        Class::OnIsSafer => {
            if o.value == Value::Bool(true) && n.value != Value::Bool(true) {
                push(r, Rule::ConfigChanged, subject(), "on → off".into(), FILE);
            }
        }
        Class::Allowlist => allowlist(path, o, n, r),
        Class::Budget => budget(path, o, n, r),
        Class::LargerIsLooser | Class::SmallerIsLooser => {
            let up = class == Class::LargerIsLooser;
            let (mut old, mut new) = (BTreeMap::new(), BTreeMap::new());
            numbers(path, &o.value, &mut old);
            numbers(path, &n.value, &mut new);
            let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            for k in keys {
                let change = match (old.get(k), new.get(k)) {
                    (Some(a), Some(b)) if (b > a) == up && a != b => format!("{a} → {b}"),
                    // One side leaves it to a default this review cannot see (a preset's own
                    // numbers): fails closed.
                    (Some(a), None) => format!("{a} → default"),
                    (None, Some(b)) => format!("default → {b}"),
                    _ => continue,
                };
                push(
                    r,
                    Rule::LimitRaised,
                    FILE.into(),
                    format!("{k} {change}"),
                    FILE,
                );
            }
        }
    }
}

/// Every number under `v`, by dotted path.
fn numbers(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                out.insert(prefix.to_string(), f);
            }
        }
        Value::Object(m) => {
            for (k, v) in m {
                numbers(&format!("{prefix}.{k}"), v, out);
            }
        }
        _ => {}
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    let list = v.as_array()?;
    let mut out: Vec<String> = list
        .iter()
        .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

fn allowlist(path: &str, o: &Setting, n: &Setting, r: &mut Review) {
    let subject = format!("config.yaml {path}");
    let Some(new) = strings(&n.value) else {
        if strings(&o.value).is_some() {
            push(
                r,
                Rule::AllowlistWidened,
                subject,
                "unset (every value passes)".into(),
                FILE,
            );
        }
        return;
    };
    let old = strings(&o.value);
    if new
        .iter()
        .any(|x| x == "*" || x.contains("*:") || x == "null")
    {
        push(
            r,
            Rule::AllowlistWidened,
            subject.clone(),
            format!("holds a wildcard: {}", new.join(", ")),
            FILE,
        );
    }
    if new.is_empty() && old.as_ref().is_some_and(|o| !o.is_empty()) {
        push(
            r,
            Rule::AllowlistWidened,
            subject.clone(),
            "empty (every value passes)".into(),
            FILE,
        );
    }
    let added: Vec<&str> = new
        .iter()
        .filter(|x| old.as_ref().is_some_and(|o| !o.contains(x)))
        .map(String::as_str)
        .collect();
    if !added.is_empty() {
        push(
            r,
            Rule::AllowlistWidened,
            subject,
            format!("+ {}", added.join(", ")),
            FILE,
        );
    }
}

fn budget(path: &str, o: &Setting, n: &Setting, r: &mut Review) {
    let limit = |v: &Value| serde_json::from_value::<RateLimit>(v.clone()).ok();
    let (old, new) = (limit(&o.value), limit(&n.value));
    let change = match (old, new) {
        (Some(a), None) => format!("{a} → none"),
        (Some(a), Some(b)) if b.is_looser_than(&a) => format!("{a} → {b}"),
        (None, None) if o.value != n.value => {
            format!("{} → {}", show(Some(&o.value)), show(Some(&n.value)))
        }
        _ => return,
    };
    push(
        r,
        Rule::LimitRaised,
        FILE.into(),
        format!("{path} {change}"),
        FILE,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(base: Value, head: Value) -> Vec<String> {
        let mut r = Review::default();
        compare(
            &Identity::of(Some(&base)),
            &Identity::of(Some(&head)),
            &mut r,
        );
        r.weakenings.iter().map(|w| w.line()).collect()
    }

    #[test]
    fn a_silent_file_compares_as_the_runtimes_default() {
        // 4 MiB is the default: a lower value tightens, a higher one loosens.
        assert!(lines(json!({}), json!({ "http": { "max_body_bytes": 65536 } })).is_empty());
        assert_eq!(
            lines(json!({}), json!({ "http": { "max_body_bytes": 67108864 } })),
            ["limit-raised: config.yaml: http.max_body_bytes 4194304 → 67108864"]
        );
        // Neutral settings say nothing; a switch turned off does.
        assert!(lines(json!({}), json!({ "telemetry": { "batch_delay_ms": 5 } })).is_empty());
        assert_eq!(
            lines(json!({}), json!({ "audit": { "chain": false } })),
            ["config-changed: config.yaml audit.chain: on → off"]
        );
    }

    #[test]
    fn an_unknown_key_that_changes_fails_closed() {
        let got = lines(json!({}), json!({ "http": { "surprise": 1 } }));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("config-changed: config.yaml http.surprise: (none) → 1 (a key the review has no class for"), "{got:?}");
    }
}
