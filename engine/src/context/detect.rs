//! Content detection: JSON, tables, logs or plain text, from a sample of the result.

use serde::Serialize;

/// What a result looks like; decides the truncation strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentKind {
    /// A JSON document (truncated structurally when it parses).
    Json,
    /// CSV, TSV or a markdown table (truncated by rows, header kept).
    Table,
    /// Log lines with timestamps or levels (truncated by lines).
    Log,
    /// Anything else (truncated by lines).
    Text,
}

/// How many leading lines detection looks at.
pub(crate) const SAMPLE_LINES: usize = 20;

/// Detects the kind of a sample: JSON if it parses or starts like JSON, a table if the first
/// lines share a delimiter count, a log if most lines start with a timestamp or level, else text.
pub fn detect(sample: &str) -> ContentKind {
    let trimmed = sample.trim();
    if !trimmed.is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok() {
        // Bare scalars ("42", "true") are text to a reader.
        if trimmed.starts_with(['{', '[', '"']) {
            return ContentKind::Json;
        }
    }
    let lines: Vec<&str> = sample.lines().take(SAMPLE_LINES).collect();
    detect_lines(&lines)
}

/// Detection on leading lines only (no full parse); shared by one-value and streaming paths.
pub(crate) fn detect_lines<S: AsRef<str>>(lines: &[S]) -> ContentKind {
    let lines: Vec<&str> = lines
        .iter()
        .take(SAMPLE_LINES)
        .map(AsRef::as_ref)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let Some(first) = lines.first() else {
        return ContentKind::Text;
    };
    if is_log(&lines) {
        return ContentKind::Log;
    }
    if starts_like_json(first) {
        return ContentKind::Json;
    }
    if table_delimiter(&lines).is_some() {
        return ContentKind::Table;
    }
    ContentKind::Text
}

fn starts_like_json(first: &str) -> bool {
    let t = first.trim_start();
    let mut chars = t.chars();
    match chars.next() {
        Some('{') => matches!(chars.find(|c| !c.is_whitespace()), None | Some('"' | '}')),
        Some('[') => {
            matches!(
                chars.find(|c| !c.is_whitespace()),
                None | Some('{' | '[' | '"' | ']' | 't' | 'f' | 'n' | '-' | '0'..='9')
            ) && !is_log_line(t)
        }
        _ => false,
    }
}

fn is_log(lines: &[&str]) -> bool {
    let hits = lines.iter().filter(|l| is_log_line(l)).count();
    hits * 2 > lines.len()
}

const LEVELS: [&str; 9] = [
    "TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A line that begins with a timestamp (ISO date, clock time, syslog month) or a level.
fn is_log_line(line: &str) -> bool {
    let t = line.trim_start().trim_start_matches('[');
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let iso_date =
        digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7) && b.get(7) == Some(&b'-');
    let clock = digits(0..2) && b.get(2) == Some(&b':') && digits(3..5);
    let syslog = MONTHS
        .iter()
        .any(|m| t.starts_with(m) && b.get(3) == Some(&b' '));
    let word: String = t.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let level = LEVELS.iter().any(|l| word.eq_ignore_ascii_case(l))
        && !t[word.len()..].starts_with(|c: char| c.is_alphanumeric());
    iso_date || clock || syslog || level
}

/// The delimiter shared by all sample lines (tab, pipe, comma, semicolon), if any.
pub(crate) fn table_delimiter(lines: &[&str]) -> Option<u8> {
    if lines.len() < 2 {
        return None;
    }
    [b'\t', b'|', b',', b';'].into_iter().find(|&d| {
        let first = count_delimiters(lines[0], d);
        first > 0 && lines.iter().all(|l| count_delimiters(l, d) == first)
    })
}

/// Delimiters outside double quotes; pipes are counted raw (markdown has no quoting).
fn count_delimiters(line: &str, delim: u8) -> usize {
    let mut quoted = false;
    let mut n = 0;
    for &b in line.as_bytes() {
        if b == b'"' && delim != b'|' {
            quoted = !quoted;
        } else if b == delim && !quoted {
            n += 1;
        }
    }
    n
}

/// A markdown header separator such as `|---|:--:|`.
pub(crate) fn is_markdown_separator(line: &str) -> bool {
    let t = line.trim();
    t.contains('-') && t.contains('|') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}
