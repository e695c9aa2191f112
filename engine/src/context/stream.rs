//! Streaming previews: every byte goes to the sink as it arrives; only the head lines, a ring
//! of tail lines and one capped partial line stay in memory.

use std::io::{self, Write};

use super::text::Collector;
use super::{ContentKind, Preset, Preview, lines_preview, table::csv_record};

/// What a finished stream produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamOutcome {
    /// The preview, or `None` when the whole stream stayed within the threshold.
    pub preview: Option<Preview>,
    /// Chars written to the sink.
    pub total_chars: u64,
    /// The whole result when it stayed within the threshold (the caller may drop the file).
    pub full_text_if_small: Option<String>,
}

/// Builds a preview of a result that arrives in pieces while writing all of it to `sink`.
///
/// Memory is bounded by the preset (head and tail lines, each capped, one capped partial line,
/// and at most `threshold_chars` of small-result text), not by the input. Wrap files in a
/// `BufWriter`. JSON streams are previewed by lines: a structural cut needs the whole value.
#[derive(Debug)]
pub struct StreamPreview<W: Write> {
    preset: Preset,
    hint: Option<ContentKind>,
    sink: W,
    lines: Collector,
    partial: Vec<u8>,
    partial_cap: usize,
    partial_chars: u64,
    partial_last: Option<u8>,
    partial_truncated: bool,
    total_chars: u64,
    small: Option<Vec<u8>>,
    rows_pushed: bool,
}

impl<W: Write> StreamPreview<W> {
    /// A stream for `preset`; `kind_hint` skips detection (e.g. `Table` for query rows).
    pub fn new(preset: &Preset, kind_hint: Option<ContentKind>, sink: W) -> StreamPreview<W> {
        StreamPreview {
            preset: preset.clone(),
            hint: kind_hint,
            sink,
            lines: Collector::new(preset),
            partial: Vec::new(),
            partial_cap: preset.max_line_chars.saturating_mul(4),
            partial_chars: 0,
            partial_last: None,
            partial_truncated: false,
            total_chars: 0,
            small: Some(Vec::new()),
            rows_pushed: false,
        }
    }

    /// Appends one line (a newline is added).
    pub fn push_line(&mut self, line: &str) -> io::Result<()> {
        self.push_chunk(line.as_bytes())?;
        self.push_chunk(b"\n")
    }

    /// Appends one table row, written as a CSV record.
    pub fn push_row(&mut self, fields: &[&str]) -> io::Result<()> {
        self.rows_pushed = true;
        self.push_line(&csv_record(fields))
    }

    /// Appends raw bytes; lines are split across chunk boundaries.
    pub fn push_chunk(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.sink.write_all(chunk)?;
        self.total_chars += count_chars(chunk);
        if let Some(buf) = &mut self.small {
            if self.total_chars > self.preset.threshold_chars as u64 {
                self.small = None;
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            self.extend_partial(&rest[..pos]);
            self.end_line(true);
            rest = &rest[pos + 1..];
        }
        self.extend_partial(rest);
        Ok(())
    }

    /// Flushes the sink and builds the outcome.
    pub fn finish(mut self) -> io::Result<StreamOutcome> {
        if self.partial_last.is_some() {
            self.end_line(false);
        }
        self.sink.flush()?;
        if let Some(buf) = self.small.take() {
            let text = String::from_utf8(buf)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            return Ok(StreamOutcome {
                preview: None,
                total_chars: self.total_chars,
                full_text_if_small: Some(text),
            });
        }
        let hint = self.hint.or(self.rows_pushed.then_some(ContentKind::Table));
        let preview = lines_preview(&self.preset, hint, &self.lines, self.total_chars);
        Ok(StreamOutcome {
            preview: Some(preview),
            total_chars: self.total_chars,
            full_text_if_small: None,
        })
    }

    fn extend_partial(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else { return };
        self.partial_last = Some(last);
        self.partial_chars += count_chars(bytes);
        let room = self.partial_cap.saturating_sub(self.partial.len());
        self.partial_truncated |= room < bytes.len();
        self.partial
            .extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    /// Ends the current line; like `str::lines`, a `\r` before a newline is not part of it.
    fn end_line(&mut self, newline: bool) {
        let mut chars = self.partial_chars;
        if newline && self.partial_last == Some(b'\r') {
            chars -= 1;
            if !self.partial_truncated {
                self.partial.pop();
            }
        }
        let text = String::from_utf8_lossy(&self.partial);
        self.lines.push(&text, chars);
        self.partial.clear();
        self.partial_chars = 0;
        self.partial_last = None;
        self.partial_truncated = false;
    }
}

/// Chars in UTF-8 bytes, counted as non-continuation bytes (exact across chunk boundaries).
fn count_chars(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| (b as i8) >= -0x40).count() as u64
}
