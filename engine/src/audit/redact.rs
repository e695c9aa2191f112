//! Argument values never reach the audit log or the process's logs. Invariant enforced here, for
//! every detail a call's audit records and every failure it logs: the text of a bad-input error
//! (which may quote the arguments, e.g. `"PASSWORD=…" does not match …`) is not recorded at all,
//! and any other error text has every argument value it contains replaced by `<argument>` (a
//! connector's error may carry a URL built from a path parameter).

use crate::errors::ToolError;
use serde_json::{Map, Value};

/// Shortest value replaced: a one-character value carries nothing worth hiding, and replacing
/// every such character would make the detail unreadable.
const MIN_LEN: usize = 2;
/// Most values kept for replacement (the longest first; arguments are bounded by the schema).
const MAX_VALUES: usize = 256;
/// What a value becomes.
const MASK: &str = "<argument>";

/// The argument values of one call, held in memory only, to blank them out of texts.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// Collects every string and number in `args` (at any depth).
    pub fn of(args: Option<&Map<String, Value>>) -> Redactor {
        let mut values = Vec::new();
        if let Some(args) = args {
            for v in args.values() {
                collect(v, &mut values);
            }
        }
        values.retain(|v| v.len() >= MIN_LEN);
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        values.truncate(MAX_VALUES);
        Redactor { values }
    }

    /// Also blanks `value` (a value bound to the caller's token, e.g. an upstream token).
    pub fn also(&mut self, value: &str) {
        if value.len() >= MIN_LEN && !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_owned());
            self.values
                .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        }
    }

    /// `text` with every argument value replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }

    /// What the audit and the logs may say about `err`.
    pub fn detail(&self, err: &ToolError) -> String {
        match err {
            ToolError::Retryable(_) => {
                "bad input; the model was told what to fix (that message may quote the arguments, so it is not recorded)".to_string()
            }
            other => self.apply(&other.to_string()),
        }
    }
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            out.push(s.clone());
            // A JSON-escaped form, as a message quoting the value with `{:?}` or serde would.
            let quoted = serde_json::to_string(s).unwrap_or_default();
            out.push(quoted.trim_matches('"').to_string());
        }
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect(x, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_blanked_and_bad_input_is_not_recorded() {
        let args = json!({"channel": "PASSWORD=hunter2", "n": 12345, "nested": {"x": ["tok\"en"]}, "c": "a"});
        let r = Redactor::of(args.as_object());
        let fatal = ToolError::fatal(
            "cannot reach https://hooks/notify/PASSWORD=hunter2 (12345) tok\\\"en",
        );
        let d = r.detail(&fatal);
        assert!(
            !d.contains("hunter2") && !d.contains("12345") && !d.contains("tok"),
            "{d}"
        );
        assert!(d.contains("<argument>"), "{d}");
        let bad = ToolError::retry("\"PASSWORD=hunter2\" does not match \"^[a-z]+$\"");
        assert!(!r.detail(&bad).contains("hunter2"));
        // One-character values are left alone.
        assert_eq!(r.apply("a b c"), "a b c");
    }
}
