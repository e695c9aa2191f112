//! The hard cap on preview text and the `Results saved to …` message.

use std::fmt::Write as _;

use super::{Preview, Strategy};

/// Room kept for the cap marker line (`... N chars omitted (preview cap) ...`).
const MARKER_ROOM: usize = 64;

/// Cuts `text` to at most `max` chars, keeping whole lines from the start (two thirds) and the
/// end (one third) around a marker. Returns the chars dropped.
pub(crate) fn hard_cap(text: &mut String, max: usize) -> u64 {
    if text.len() <= max {
        return 0;
    }
    let total = text.chars().count();
    if total <= max {
        return 0;
    }
    let budget = max.saturating_sub(MARKER_ROOM);
    let head_budget = budget * 2 / 3;
    let tail_budget = budget - head_budget;
    let mut head_end = text.char_indices().nth(head_budget).map_or(0, |(i, _)| i);
    if let Some(nl) = text[..head_end]
        .rfind('\n')
        .filter(|&nl| nl >= head_end / 2)
    {
        head_end = nl;
    }
    let mut tail_start = match tail_budget {
        0 => text.len(),
        n => text.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i),
    };
    let tail_len = text.len() - tail_start;
    if let Some(nl) = text[tail_start..]
        .find('\n')
        .filter(|&nl| nl <= tail_len / 2)
    {
        tail_start += nl + 1;
    }
    let tail_start = tail_start.max(head_end);
    let kept = text[..head_end].chars().count() + text[tail_start..].chars().count();
    let dropped = (total - kept) as u64;
    let mut out = String::with_capacity(max * 4);
    out.push_str(&text[..head_end]);
    let _ = write!(out, "\n... {dropped} chars omitted (preview cap) ...\n");
    out.push_str(&text[tail_start..]);
    *text = out;
    dropped
}

/// The message a tool returns instead of a large result: where the full result is, what the
/// preview leaves out, a blank line, then the preview.
pub fn render_saved(preview: &Preview, saved_path: &str) -> String {
    let mut out = String::with_capacity(preview.text.len() + 200);
    let _ = writeln!(
        out,
        "Results saved to {saved_path} ({} chars)",
        preview.total_chars
    );
    out.push_str(&summary(preview));
    out.push_str("\n\n");
    out.push_str(&preview.text);
    out
}

/// One line saying what was omitted, e.g. `Showing 30 of 1200 rows; 1170 rows omitted.`
pub fn summary(preview: &Preview) -> String {
    let (om, tot) = (&preview.omitted, &preview.totals);
    let shown = |unit: &str, total: u64, omitted: u64| match omitted {
        0 if total == 1 => format!("Showing the only {}.", unit.trim_end_matches('s')),
        0 => format!("Showing all {total} {unit}."),
        n => format!(
            "Showing {} of {total} {unit}; {n} {unit} omitted.",
            total - n
        ),
    };
    let mut line = match preview.strategy {
        Strategy::Rows => shown("rows", tot.rows, om.rows),
        Strategy::Lines => shown("lines", tot.lines, om.lines),
        Strategy::Json => {
            let mut parts = Vec::new();
            if om.items > 0 {
                parts.push(format!("{} items", om.items));
            }
            if om.keys > 0 {
                parts.push(format!("{} keys", om.keys));
            }
            match parts.is_empty() {
                true => "JSON preview with its full structure.".to_owned(),
                false => format!("JSON preview; {} omitted.", parts.join(" and ")),
            }
        }
    };
    if om.chars > 0 {
        let _ = write!(line, " {} chars cut from long lines or values.", om.chars);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::hard_cap;

    #[test]
    fn hard_cap_keeps_head_and_tail_lines_within_the_cap() {
        let mut text: String = (0..1000).map(|i| format!("line {i:04} é\n")).collect();
        let total = text.chars().count();
        let dropped = hard_cap(&mut text, 500);
        assert!(text.chars().count() <= 500, "{}", text.chars().count());
        assert!(text.starts_with("line 0000 é\n"));
        assert!(text.ends_with("line 0999 é\n"));
        let marker = format!("\n... {dropped} chars omitted (preview cap) ...\n");
        let kept = text.replace(&marker, "");
        assert_eq!(kept.chars().count() as u64 + dropped, total as u64);
        let mut small = "short".to_owned();
        assert_eq!(hard_cap(&mut small, 500), 0);
        assert_eq!(small, "short");
    }

    #[test]
    fn hard_cap_cuts_a_single_huge_line() {
        let mut text = "€".repeat(200_000);
        let dropped = hard_cap(&mut text, 1000);
        assert!(text.chars().count() <= 1000);
        assert!(dropped >= 199_000);
    }
}
