//! `${VAR}` references in connector settings, read the way the runtime expands them
//! (`${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:?m}`, `${VAR?m}`, `$$`), so deployments can pass
//! exactly the variables a connector needs with the same defaults.

use serde_json::Value;

/// One `${…}` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarRef {
    /// The variable.
    pub name: String,
    /// The operator as written: "", ":-", "-", ":?" or "?".
    pub op: String,
    /// Default or message text after the operator.
    pub arg: String,
    /// JSON pointer of the string it appears in (e.g. `/headers/Authorization`).
    pub pointer: String,
    /// Whether the reference is the whole string (the setting is just this variable).
    pub whole: bool,
}

impl VarRef {
    /// The reference as written, e.g. `${RECORDS_DB:-data/records.db}`.
    pub fn written(&self) -> String {
        format!("${{{}{}{}}}", self.name, self.op, self.arg)
    }

    /// The default text, if the reference has one.
    pub fn default(&self) -> Option<&str> {
        self.op.contains('-').then_some(self.arg.as_str())
    }
}

/// Every reference in the strings of `value`, in document order.
pub fn references(value: &Value) -> Vec<VarRef> {
    let mut out = Vec::new();
    walk(value, &mut String::new(), &mut out);
    out
}

fn walk(value: &Value, pointer: &mut String, out: &mut Vec<VarRef>) {
    let len = pointer.len();
    match value {
        Value::String(s) => scan(s, pointer, out),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointer.push_str(&format!("/{i}"));
                walk(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                pointer.push('/');
                pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                walk(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

fn scan(s: &str, pointer: &str, out: &mut Vec<VarRef>) {
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            rest = r;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            rest = after;
            continue;
        };
        let Some(end) = body.find('}') else { return };
        let inner = &body[..end];
        let name_len = inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len());
        let (name, tail) = inner.split_at(name_len);
        let op_len = [":-", ":?", "-", "?"]
            .iter()
            .find(|op| tail.starts_with(**op))
            .map_or(0, |op| op.len());
        if !name.is_empty() {
            out.push(VarRef {
                name: name.to_owned(),
                op: tail[..op_len].to_owned(),
                arg: tail[op_len..].to_owned(),
                pointer: pointer.to_owned(),
                whole: s == format!("${{{inner}}}"),
            });
        }
        rest = &body[end + 1..];
    }
}

/// `text` as it reads when its variables keep their defaults: a whole `${VAR:-default}` gives
/// `default` (empty without one); plain text is itself.
pub fn with_defaults(text: &str) -> String {
    match references(&serde_json::json!(text)).first() {
        Some(r) if r.whole => r.default().unwrap_or_default().to_string(),
        _ => text.to_string(),
    }
}

/// Whether `program` is a program name the image can put on `PATH`: letters, digits and
/// `._+-`, not starting with `-`.
pub fn is_program_name(program: &str) -> bool {
    program.starts_with(|c: char| c.is_ascii_alphanumeric())
        && program
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_form_like_the_runtime() {
        let v = json!({
            "path": "${RECORDS_DB:-data/records.db}",
            "headers": { "Authorization": "Bearer ${TOKEN}", "X": "$$not ${A-b}${B:?say}" },
        });
        let r = references(&v);
        let names: Vec<(&str, &str, &str, bool)> = r
            .iter()
            .map(|v| (v.name.as_str(), v.op.as_str(), v.arg.as_str(), v.whole))
            .collect();
        assert_eq!(
            names,
            [
                ("RECORDS_DB", ":-", "data/records.db", true),
                ("TOKEN", "", "", false),
                ("A", "-", "b", false),
                ("B", ":?", "say", false),
            ]
        );
        assert_eq!(r[1].pointer, "/headers/Authorization");
        assert_eq!(r[0].default(), Some("data/records.db"));
        assert_eq!(r[0].written(), "${RECORDS_DB:-data/records.db}");
    }
}
