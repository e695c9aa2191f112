//! Line storage with bounded memory (head + ring of tail lines, each capped) and the
//! head/tail line strategy for logs and text.

use std::collections::VecDeque;
use std::fmt::Write as _;

use super::{Body, Omitted, Preset, Totals};

/// One kept line, cut to the preset's per-line cap.
#[derive(Clone, Debug, Default)]
pub(crate) struct Line {
    text: String,
    cut: u64,
}

impl Line {
    /// The kept part of the line (without the cut marker).
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

/// The first and last lines of a result, each capped; everything between is only counted.
#[derive(Debug)]
pub(crate) struct Collector {
    head: Vec<Line>,
    head_cap: usize,
    tail: VecDeque<Line>,
    tail_cap: usize,
    total: u64,
    max_line_chars: usize,
}

impl Collector {
    /// Room for every strategy of the preset: the larger head and tail, plus two header lines.
    pub(crate) fn new(p: &Preset) -> Collector {
        let head_cap = p.lines_head.max(p.rows_head + 2);
        let tail_cap = p.lines_tail.max(p.rows_tail);
        Collector {
            head: Vec::with_capacity(head_cap.min(1024)),
            head_cap,
            tail: VecDeque::with_capacity(tail_cap.min(1024)),
            tail_cap,
            total: 0,
            max_line_chars: p.max_line_chars,
        }
    }

    /// Adds a line given by a prefix holding at least its first `max_line_chars` chars (or all
    /// of it) and its full length in chars.
    pub(crate) fn push(&mut self, prefix: &str, line_chars: u64) {
        self.total += 1;
        let mut line = if self.head.len() < self.head_cap {
            Line::default()
        } else if self.tail_cap == 0 {
            return;
        } else if self.tail.len() == self.tail_cap {
            self.tail.pop_front().unwrap_or_default()
        } else {
            Line::default()
        };
        line.text.clear();
        let (end, kept) = cap_chars(prefix, self.max_line_chars);
        line.text.push_str(&prefix[..end]);
        line.cut = line_chars.saturating_sub(kept);
        if self.head.len() < self.head_cap {
            self.head.push(line);
        } else {
            self.tail.push_back(line);
        }
    }

    /// Number of lines seen.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept head lines, for detection.
    pub(crate) fn head(&self) -> &[Line] {
        &self.head
    }

    /// Line `i`, if it is still held (always true for the ranges the strategies ask for).
    pub(crate) fn get(&self, i: u64) -> Option<&Line> {
        if let Some(line) = usize::try_from(i).ok().and_then(|i| self.head.get(i)) {
            return Some(line);
        }
        let start = self.total - self.tail.len() as u64;
        let offset = i.checked_sub(start)?;
        self.tail.get(usize::try_from(offset).ok()?)
    }

    /// Appends lines `from..to`, one per line, counting chars cut from them.
    pub(crate) fn emit(&self, from: u64, to: u64, out: &mut String, om: &mut Omitted) {
        for i in from..to {
            let Some(line) = self.get(i) else { continue };
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&line.text);
            if line.cut > 0 {
                let _ = write!(out, "… [{} chars cut]", line.cut);
                om.chars += line.cut;
            }
        }
    }
}

/// Byte end and char count of the first `max` chars of `s`.
pub(crate) fn cap_chars(s: &str, max: usize) -> (usize, u64) {
    if s.len() <= max {
        return (s.len(), s.chars().count() as u64);
    }
    match s.char_indices().nth(max) {
        Some((end, _)) => (end, max as u64),
        None => (s.len(), s.chars().count() as u64),
    }
}

/// Appends a marker line such as `... 12 lines omitted ...`.
pub(crate) fn marker(out: &mut String, n: u64, unit: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    let _ = write!(out, "... {n} {unit} omitted ...");
}

/// `head` lines, a marker, `tail` lines.
pub(crate) fn lines_body(c: &Collector, head: usize, tail: usize) -> Body {
    let n = c.total();
    let (h, t) = (head as u64, tail as u64);
    let mut text = String::new();
    let mut omitted = Omitted::default();
    if n <= h + t {
        c.emit(0, n, &mut text, &mut omitted);
    } else {
        omitted.lines = n - h - t;
        c.emit(0, h, &mut text, &mut omitted);
        marker(&mut text, omitted.lines, "lines");
        c.emit(n - t, n, &mut text, &mut omitted);
    }
    let totals = Totals {
        lines: n,
        ..Totals::default()
    };
    Body {
        text,
        omitted,
        totals,
    }
}
