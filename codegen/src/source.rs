//! Spec source files and positions inside them.

use std::path::{Path, PathBuf};

/// One loaded spec file: where it is and what it says.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Path as shown in diagnostics and headers (relative to the project root when possible).
    pub display: String,
    /// Path on disk.
    pub path: PathBuf,
    /// The file's text.
    pub text: std::sync::Arc<str>,
}

impl SourceFile {
    /// Reads a file; `display` is the path shown to users.
    pub fn read(path: &Path, display: String) -> std::io::Result<SourceFile> {
        let text = std::fs::read_to_string(path)?;
        Ok(SourceFile {
            display,
            path: path.to_path_buf(),
            text: text.into(),
        })
    }

    /// A file held in memory (tests, generated fixtures).
    pub fn in_memory(display: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let display = display.into();
        SourceFile {
            path: PathBuf::from(&display),
            display,
            text: text.into().into(),
        }
    }

    /// The byte range of the 1-based `line`, without its newline.
    pub fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let mut start = 0;
        for (i, l) in self.text.split_inclusive('\n').enumerate() {
            if i + 1 == line {
                let body = l.trim_end_matches(['\n', '\r']);
                return start..start + body.len();
            }
            start += l.len();
        }
        self.text.len()..self.text.len()
    }
}

/// A position in a spec file: 1-based line and column, byte offsets of the marked range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column (in characters) of the start.
    pub col: usize,
    /// Byte offset of the start.
    pub start: usize,
    /// Byte offset of the end (exclusive).
    pub end: usize,
}

impl Span {
    /// A span from character offsets as the YAML parser reports them.
    pub fn from_chars(
        text: &str,
        line: usize,
        col0: usize,
        start_char: usize,
        end_char: usize,
    ) -> Span {
        let start = char_to_byte(text, start_char);
        let mut end = char_to_byte(text, end_char.max(start_char));
        // A node's end marker may sit after trailing whitespace or on the next line: keep the
        // highlight on the start line and trim it.
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        end = end.min(line_end);
        while end > start && text.as_bytes()[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        if end <= start {
            end = (start + 1).min(line_end.max(start));
        }
        Span {
            line,
            col: col0 + 1,
            start,
            end,
        }
    }
}

impl Span {
    /// The first occurrence of `needle` in `text` within `window` bytes after this span's start
    /// that `accept` agrees with (it sees the bytes after the match), or this span unchanged.
    /// Points a diagnostic at the part of a long value that is wrong.
    pub fn find(
        self,
        text: &str,
        needle: &str,
        window: usize,
        accept: impl Fn(&str) -> bool,
    ) -> Span {
        let end = text.len().min(self.start.saturating_add(window));
        let Some(hay) = text.get(self.start..end) else {
            return self;
        };
        let found = hay
            .match_indices(needle)
            .map(|(i, _)| self.start + i)
            .find(|&at| accept(&text[at + needle.len()..]));
        let Some(start) = found else {
            return self;
        };
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        Span {
            line: text[..start].matches('\n').count() + 1,
            col: text[line_start..start].chars().count() + 1,
            start,
            end: start + needle.len(),
        }
    }
}

fn char_to_byte(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(b, _)| b)
}
