//! Context presets and type-aware truncation: what of a large tool result reaches the model.
//!
//! A result within the preset's threshold passes unchanged. A larger one becomes a [`Preview`]
//! built by the strategy of its [`ContentKind`] (rows, lines or JSON structure), always under
//! the preset's hard cap; the caller saves the full result and returns [`render_saved`].
//! [`StreamPreview`] does the same for results that arrive in pieces, in bounded memory.
//! This module knows nothing of workspaces or MCP.

mod detect;
mod json;
mod preset;
mod render;
mod stream;
mod table;
mod text;

pub use detect::{ContentKind, detect};
pub use json::OMITTED_KEYS_KEY;
pub use preset::{MIN_PREVIEW_CHARS, Preset, PresetError, PresetOverride, Presets};
pub use render::{render_saved, summary};
pub use stream::{StreamOutcome, StreamPreview};

use serde_json::Value;

/// How a preview was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Header, head rows, marker, tail rows.
    Rows,
    /// Head lines, marker, tail lines.
    Lines,
    /// Structural JSON truncation.
    Json,
}

/// What a preview leaves out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Omitted {
    /// Table rows between head and tail.
    pub rows: u64,
    /// Lines between head and tail.
    pub lines: u64,
    /// JSON array items, at every level.
    pub items: u64,
    /// JSON object keys, at every level.
    pub keys: u64,
    /// Chars cut from kept lines, strings and keys, and by the hard cap.
    pub chars: u64,
}

/// What the full result holds, at the level the strategy truncates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Data rows of a table (header excluded).
    pub rows: u64,
    /// Lines of a log or text.
    pub lines: u64,
    /// Items of a top-level JSON array.
    pub items: u64,
    /// Keys of a top-level JSON object.
    pub keys: u64,
}

/// A truncated view of a large result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview {
    /// What the result looked like.
    pub kind: ContentKind,
    /// How it was cut.
    pub strategy: Strategy,
    /// The preview, at most the preset's `max_preview_chars` chars.
    pub text: String,
    /// Chars of the full result.
    pub total_chars: u64,
    /// What the preview leaves out.
    pub omitted: Omitted,
    /// What the full result holds.
    pub totals: Totals,
}

/// A preview of a structured result, with the truncated value for `structuredContent`.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPreview {
    /// The text preview (pretty-printed truncated JSON).
    pub preview: Preview,
    /// The truncated value; valid JSON with omission markers in place of what was cut.
    pub value: Value,
}

/// Preview text before the hard cap.
pub(crate) struct Body {
    pub(crate) text: String,
    pub(crate) omitted: Omitted,
    pub(crate) totals: Totals,
}

/// `None` when `text` is within the preset's threshold (return it unchanged), else a preview
/// cut by the strategy of its detected kind.
pub fn truncate_text(preset: &Preset, text: &str) -> Option<Preview> {
    if text.len() <= preset.threshold_chars {
        return None;
    }
    let total_chars = text.chars().count() as u64;
    if total_chars <= preset.threshold_chars as u64 {
        return None;
    }
    if text.trim_start().starts_with(['{', '[', '"'])
        && let Ok(value) = serde_json::from_str::<Value>(text)
    {
        return Some(json_preview(preset, &value, total_chars).preview);
    }
    let mut lines = text::Collector::new(preset);
    for line in text.lines() {
        lines.push(line, line.chars().count() as u64);
    }
    Some(lines_preview(preset, None, &lines, total_chars))
}

/// `None` when the compact serialization of `value` is within the threshold, else a structural
/// preview and the truncated value.
pub fn truncate_json(preset: &Preset, value: &Value) -> Option<JsonPreview> {
    let total_chars = json::compact_chars(value);
    if total_chars <= preset.threshold_chars as u64 {
        return None;
    }
    Some(json_preview(preset, value, total_chars))
}

fn json_preview(preset: &Preset, value: &Value, total_chars: u64) -> JsonPreview {
    let cut = json::cut(value, preset);
    let body = Body {
        text: cut.text,
        omitted: cut.omitted,
        totals: cut.totals,
    };
    JsonPreview {
        preview: finish(preset, ContentKind::Json, Strategy::Json, body, total_chars),
        value: cut.value,
    }
}

/// A preview from collected lines; the kind is the hint or detected from the head lines.
pub(crate) fn lines_preview(
    preset: &Preset,
    hint: Option<ContentKind>,
    lines: &text::Collector,
    total_chars: u64,
) -> Preview {
    let kind = hint.unwrap_or_else(|| {
        let sample: Vec<&str> = lines.head().iter().map(text::Line::text).collect();
        detect::detect_lines(&sample)
    });
    let (strategy, mut head, mut tail) = match kind {
        ContentKind::Table => (Strategy::Rows, preset.rows_head, preset.rows_tail),
        _ => (Strategy::Lines, preset.lines_head, preset.lines_tail),
    };
    // Fewer whole lines rather than a blind cut, so the omitted counts stay exact.
    loop {
        let body = match strategy {
            Strategy::Rows => table::rows_body(lines, head, tail),
            _ => text::lines_body(lines, head, tail),
        };
        let fits = body.text.len() <= preset.max_preview_chars
            || body.text.chars().count() <= preset.max_preview_chars;
        if fits || (head <= 1 && tail == 0) {
            return finish(preset, kind, strategy, body, total_chars);
        }
        head = (head * 3 / 4).max(1);
        tail = tail * 3 / 4;
    }
}

fn finish(
    preset: &Preset,
    kind: ContentKind,
    strategy: Strategy,
    mut body: Body,
    total_chars: u64,
) -> Preview {
    body.omitted.chars += render::hard_cap(&mut body.text, preset.max_preview_chars);
    Preview {
        kind,
        strategy,
        text: body.text,
        total_chars,
        omitted: body.omitted,
        totals: body.totals,
    }
}
