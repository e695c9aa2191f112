//! Inspection: what a tool returns and what a `connect` call sends are read for credentials.
//!
//! The invariant this module holds one half of (the other is in [`crate::call`]): no value a
//! rule finds in a result reaches the model or the saved full result — it is replaced by
//! `[redacted: <rule>]` — and a result with a finding leaves only after its session's level is
//! `secret` in the store; a `connect` call whose arguments hold one is refused before anything
//! leaves. A tool turns this off only by a reason in its spec (`uninspected:`), which the review
//! names. The rules are gitleaks' (see `rules/README.md`), compiled once ([`Rules::get`]).

mod rules;
mod scan;
mod stream;

pub use rules::{Rules, RulesError};
pub use scan::{Hit, placeholder};
pub use stream::StreamRedactor;

use serde_json::Value;

/// How many bytes a streamed result holds back to find a credential across chunk boundaries
/// (a 4096-bit RSA key in PEM is about 3.3 KB).
pub const STREAM_WINDOW: usize = 16 << 10;

/// One credential found, without its value: the rule and where (`result`, a JSON pointer into
/// the structured result, or an argument's name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule's id, e.g. `aws-access-token`.
    pub rule: &'static str,
    /// Where it was.
    pub at: String,
}

impl Finding {
    /// `rule at where` for the audit record and logs (never the value).
    pub fn describe(findings: &[Finding]) -> String {
        let parts: Vec<String> = findings
            .iter()
            .map(|f| format!("{} at {}", f.rule, f.at))
            .collect();
        parts.join(", ")
    }
}

/// Redacts `text` in place; records a finding per rule, at `at`.
pub fn redact_text(rules: &Rules, text: &mut String, at: &str, found: &mut Vec<Finding>) {
    if let Some((clean, hit)) = rules.redact(text) {
        *text = clean;
        for rule in hit {
            found.push(Finding {
                rule,
                at: at.to_string(),
            });
        }
    }
}

/// Redacts every string in `value` (object keys are names, not data, and are left as they are);
/// a finding's `at` is the string's JSON pointer under `root`.
pub fn redact_json(rules: &Rules, value: &mut Value, root: &str, found: &mut Vec<Finding>) {
    match value {
        Value::String(s) => redact_text(rules, s, root, found),
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                redact_json(rules, v, &format!("{root}/{i}"), found);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let key = k.replace('~', "~0").replace('/', "~1");
                redact_json(rules, v, &format!("{root}/{key}"), found);
            }
        }
        _ => {}
    }
}

/// The first credential in a call's arguments, by argument name (`message`, `headers/x`).
pub fn find_in_args(rules: &Rules, args: &serde_json::Map<String, Value>) -> Option<Finding> {
    fn walk(rules: &Rules, v: &Value, at: String) -> Option<Finding> {
        match v {
            Value::String(s) => rules
                .find(s.as_bytes())
                .first()
                .map(|h| Finding { rule: h.rule, at }),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, v)| walk(rules, v, format!("{at}/{i}"))),
            Value::Object(map) => map
                .iter()
                .find_map(|(k, v)| walk(rules, v, format!("{at}/{k}"))),
            _ => None,
        }
    }
    args.iter().find_map(|(k, v)| walk(rules, v, k.clone()))
}
