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
        Span::from_chars_with(
            &CharTable::new(text),
            text,
            line,
            col0,
            start_char,
            end_char,
        )
    }

    /// [`Span::from_chars`] with a prebuilt [`CharTable`] for `text`.
    pub fn from_chars_with(
        table: &CharTable,
        text: &str,
        line: usize,
        col0: usize,
        start_char: usize,
        end_char: usize,
    ) -> Span {
        let start = table.byte(start_char);
        let mut end = table.byte(end_char.max(start_char));
        // A node's end marker may sit after trailing whitespace or on the next line: keep the
        // highlight on the start line and trim it.
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        end = end.min(line_end);
        while end > start && text.as_bytes()[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        if end <= start {
            // One whole character (never half of a multibyte one), or nothing at a line end.
            end = start
                + text[start..line_end]
                    .chars()
                    .next()
                    .map_or(0, char::len_utf8);
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

/// Character offset → byte offset for one text, built once per file (loading would otherwise
/// walk the text once per node, quadratic in file size). ASCII text needs no table.
#[derive(Debug)]
pub struct CharTable {
    len: usize,
    offsets: Option<Vec<usize>>,
}

impl CharTable {
    /// Builds the table for `text`.
    pub fn new(text: &str) -> CharTable {
        CharTable {
            len: text.len(),
            offsets: (!text.is_ascii()).then(|| text.char_indices().map(|(b, _)| b).collect()),
        }
    }

    /// The byte offset of character `chars` (the text's length past the end).
    pub fn byte(&self, chars: usize) -> usize {
        match &self.offsets {
            None => chars.min(self.len),
            Some(o) => o.get(chars).copied().unwrap_or(self.len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_chars_converts_multibyte_offsets_to_bytes() {
        // "ü" and "ß" are two bytes each, "—" three: char offsets and byte offsets differ.
        let text = "name: grüß\nwhy: a — b\n";
        let start_char = text[..text.find("grüß").expect("present")].chars().count();
        let span = Span::from_chars(text, 1, 6, start_char, start_char + 4);
        assert_eq!(&text[span.start..span.end], "grüß");
        assert_eq!((span.line, span.col), (1, 7));
        let b = text.find('b').expect("present");
        let b_char = text[..b].chars().count();
        let span = Span::from_chars(text, 2, 9, b_char, b_char + 1);
        assert_eq!(&text[span.start..span.end], "b");
        assert_eq!(span.col, 10);
    }

    #[test]
    fn from_chars_keeps_the_highlight_on_one_line_without_trailing_space() {
        let text = "key: value   \nnext: 1\n";
        let end = text.chars().count(); // a block that ends at the end of the file
        let span = Span::from_chars(text, 1, 5, 5, end);
        assert_eq!(&text[span.start..span.end], "value");
    }

    #[test]
    fn from_chars_never_makes_an_empty_or_out_of_range_span() {
        let text = "a: é";
        let span = Span::from_chars(text, 1, 3, 3, 3);
        assert_eq!(&text[span.start..span.end], "é");
        assert!(span.end > span.start && span.end <= text.len());
        let past = Span::from_chars(text, 1, 10, 10, 12);
        assert_eq!((past.start, past.end), (text.len(), text.len()));
    }

    #[test]
    fn find_points_at_the_needle_on_a_later_line() {
        let text = "sql: |\n  SELECT a\n  WHERE ü = :who\n";
        let value = Span::from_chars(text, 1, 5, 5, 6);
        let span = value.find(text, ":who", 100, |_| true);
        assert_eq!(&text[span.start..span.end], ":who");
        assert_eq!((span.line, span.col), (3, 13));
        assert_eq!(value.find(text, ":nobody", 100, |_| true), value);
        assert_eq!(
            value.find(text, ":who", 10, |_| true),
            value,
            "outside the window"
        );
        assert_eq!(
            value.find(text, ":wh", 100, |after| after.starts_with(' ')),
            value
        );
    }

    #[test]
    fn line_range_excludes_the_newline() {
        let file = SourceFile::in_memory("t", "ab\r\ncdé\n");
        assert_eq!(&file.text[file.line_range(1)], "ab");
        assert_eq!(&file.text[file.line_range(2)], "cdé");
        assert_eq!(file.line_range(9), file.text.len()..file.text.len());
    }
}
