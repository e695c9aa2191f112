//! Block-style YAML text from a JSON value, for the deployment emitters: keys keep insertion
//! order, and every string that a YAML 1.1 or 1.2 reader could take for anything but a string
//! (`yes`, `on`, `8000:8000`, `0.1`, `~`, …) is written double-quoted.

use serde_json::Value;
use std::fmt::Write;

/// The value as a YAML document (a trailing newline, no `---`).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    for (key, value) in map {
        let _ = write!(out, "{:indent$}{}:", "", string(key));
        write_child(out, value, indent);
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        let _ = write!(out, "{:indent$}-", "");
        match item {
            Value::Object(map) if !map.is_empty() => {
                // The first key shares the dash's line; the rest align under it.
                let mut first = String::new();
                write_map(&mut first, map, indent + 2);
                out.push(' ');
                out.push_str(first.trim_start());
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn write_child(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A string as a plain scalar when that is unambiguous, else double-quoted (JSON escapes are
/// valid YAML double-quoted escapes).
fn string(s: &str) -> String {
    if is_plain(s) {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
    }
}

fn is_plain(s: &str) -> bool {
    const WORDS: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "nan", "inf",
    ];
    let Some(first) = s.chars().next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_' || first == '/' || first == '@')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@'))
        && !WORDS.contains(&s.to_ascii_lowercase().as_str())
        && !s.starts_with('@')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_maps_and_lists() {
        let v = json!({
            "services": {"a": {"command": ["serve", "a", "--listen", "0.0.0.0:8000"], "read_only": true}},
            "list": [{"name": "x", "port": 1}, "on", "", 3],
            "empty": {}
        });
        assert_eq!(
            to_yaml(&v),
            "services:\n  a:\n    command:\n      - serve\n      - a\n      - \"--listen\"\n      - \"0.0.0.0:8000\"\n    read_only: true\nlist:\n  - name: x\n    port: 1\n  - \"on\"\n  - \"\"\n  - 3\nempty: {}\n"
        );
    }

    #[test]
    fn ambiguous_strings_are_quoted() {
        for s in [
            "yes",
            "No",
            "8000:8000",
            "0.1",
            "1",
            "~",
            "a b",
            "x: y",
            "#c",
            "-",
            "@type",
        ] {
            assert!(string(s).starts_with('"'), "{s}");
        }
        for s in ["bulkhead", "template-proxied", "/var/lib/x", "envoy.yaml"] {
            assert_eq!(string(s), s);
        }
    }
}
