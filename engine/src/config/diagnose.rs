//! A configuration that parsed as YAML but does not fit [`Config`](super::Config) — an unknown
//! key, a wrong type, a missing key — reported like a spec error: `file:line:col`, the line, a
//! caret under the key, and a help line (did you mean …, what is expected).

use bulkhead_lang::diag::Diagnostic;
use bulkhead_lang::source::{SourceFile, Span};
use bulkhead_lang::suggest::did_you_mean;
use serde_path_to_error::Segment;

use super::{ConfigError, Positions};

/// The positioned error for a failed deserialisation of `text` (file `origin`).
pub(super) fn invalid(
    text: &str,
    origin: &str,
    positions: &Positions,
    e: &serde_path_to_error::Error<serde_json::Error>,
) -> ConfigError {
    let mut pointer = String::new();
    let mut dotted: Vec<String> = Vec::new();
    for seg in e.path().iter() {
        match seg {
            Segment::Seq { index } => {
                pointer.push_str(&format!("/{index}"));
                dotted.push(format!("[{index}]"));
            }
            Segment::Map { key } => {
                pointer.push_str(&format!("/{}", key.replace('~', "~0").replace('/', "~1")));
                dotted.push(key.clone());
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    let at = dotted.join(".").replace(".[", "[");
    let inner = e.inner().to_string();
    // Backticked words in serde's message: the field, then what was expected.
    let words: Vec<&str> = inner.split('`').skip(1).step_by(2).collect();
    let (message, key_pointer, label, help) = if inner.starts_with("unknown field") {
        let field = words.first().copied().unwrap_or("");
        let expected = &words[1.min(words.len())..];
        let escaped = format!("/{}", field.replace('~', "~0").replace('/', "~1"));
        // The path may or may not end with the unknown key itself.
        let (key, at) = match pointer.strip_suffix(&escaped) {
            Some(parent) => (pointer.clone(), positions_label(parent)),
            None => (format!("{pointer}{escaped}"), at.clone()),
        };
        let help = match did_you_mean(field, expected.iter().copied()) {
            Some(best) => format!("did you mean `{best}`?"),
            None if expected.is_empty() => "this section takes no keys".to_string(),
            None => format!(
                "the keys here are {}",
                expected
                    .iter()
                    .map(|w| format!("`{w}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let within = if at.is_empty() {
            String::new()
        } else {
            format!(" in `{at}`")
        };
        (
            format!("unknown key `{field}`{within}"),
            key,
            "not a known key".to_string(),
            help,
        )
    } else if inner.starts_with("missing field") {
        let field = words.first().copied().unwrap_or("");
        let within = if at.is_empty() {
            "the top level".to_string()
        } else {
            format!("`{at}`")
        };
        (
            format!("`{field}` is missing in {within}"),
            pointer.clone(),
            format!("`{field}` is required here"),
            format!("add `{field}:` to {within}"),
        )
    } else {
        (
            format!("`{at}` is invalid: {inner}"),
            pointer.clone(),
            "this value".to_string(),
            "see config.yaml's comments and docs/configuration.md for the expected shape"
                .to_string(),
        )
    };
    let file = SourceFile::in_memory(origin, text);
    let span = positions
        .get(&key_pointer)
        .or_else(|| positions.get(&pointer))
        .map(|&(line, col0, start, end)| Span::from_chars(text, line, col0, start, end))
        .unwrap_or(Span {
            line: 1,
            col: 1,
            start: 0,
            end: 0,
        });
    let d = Diagnostic::error(&file, span, message)
        .label(label)
        .help(help);
    ConfigError::Invalid {
        location: d.location(),
        rendered: d.render(),
    }
}

/// `http.allowed_origins[0]` for the pointer `/http/allowed_origins/0`.
fn positions_label(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.chars().all(|c| c.is_ascii_digit()) && !part.is_empty() {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part);
        }
    }
    out
}
