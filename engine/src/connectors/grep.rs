//! Line search shared by `logs` and `files`: a size-limited regex, capped line reading and
//! grep-style context (`name:N: match`, `name-N- context`, `--` between groups).

use std::collections::VecDeque;
use std::io::{BufRead, Read};

use regex::bytes::{Regex, RegexBuilder};

use super::stream::{Sink, Stop};
use crate::errors::ToolError;
use crate::server::Chunk;

/// The longest line kept for matching and output; the rest of a longer line is skipped.
pub const MAX_LINE: usize = 64 * 1024;

/// Compiles a user pattern with bounded memory; a bad pattern is retryable with the reason.
pub fn compile(pattern: &str) -> Result<Regex, ToolError> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(4 << 20)
        .nest_limit(64)
        .build()
        .map_err(|e| ToolError::retry(format!("invalid regular expression: {e}")))
}

/// Reads one line (without the newline) into `buf`, keeping at most [`MAX_LINE`] bytes.
/// Returns the bytes consumed from `reader` (0 at end of input).
pub fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    buf.clear();
    let mut n = reader
        .by_ref()
        .take(MAX_LINE as u64)
        .read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(0);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() >= MAX_LINE {
        // Skip the rest of an over-long line.
        let mut sink = Vec::new();
        loop {
            sink.clear();
            let m = reader
                .by_ref()
                .take(MAX_LINE as u64)
                .read_until(b'\n', &mut sink)?;
            n += m;
            if m == 0 || sink.last() == Some(&b'\n') {
                break;
            }
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(n)
}

/// Emits matches with `context` lines before and after, across any number of files.
pub struct Context {
    context: usize,
    before: VecDeque<(u64, Vec<u8>)>,
    after_left: usize,
    last_emitted: Option<u64>,
    any_emitted: bool,
    /// Matching lines emitted so far.
    pub matches: u64,
}

impl Context {
    /// A context printer with `context` lines on each side.
    pub fn new(context: usize) -> Context {
        Context {
            context,
            before: VecDeque::with_capacity(context),
            after_left: 0,
            last_emitted: None,
            any_emitted: false,
            matches: 0,
        }
    }

    /// Starts a new file: context never crosses files.
    pub fn new_file(&mut self) {
        self.before.clear();
        self.after_left = 0;
        self.last_emitted = None;
    }

    /// Handles line `n` (1-based) of file `name`.
    pub fn line(
        &mut self,
        sink: &mut Sink,
        name: &str,
        n: u64,
        text: &[u8],
        is_match: bool,
    ) -> Result<(), Stop> {
        if is_match {
            self.matches += 1;
            let first = self.before.front().map_or(n, |(m, _)| *m);
            if self.context > 0
                && self.any_emitted
                && self.last_emitted.is_none_or(|l| l + 1 < first)
            {
                sink.push(Chunk::Line("--".into()))?;
            }
            while let Some((m, t)) = self.before.pop_front() {
                sink.push(Chunk::Line(format_line(name, m, '-', &t)))?;
            }
            sink.push(Chunk::Line(format_line(name, n, ':', text)))?;
            self.mark(n);
            self.after_left = self.context;
        } else if self.after_left > 0 {
            self.after_left -= 1;
            sink.push(Chunk::Line(format_line(name, n, '-', text)))?;
            self.mark(n);
        } else if self.context > 0 {
            if self.before.len() == self.context {
                self.before.pop_front();
            }
            self.before.push_back((n, text.to_vec()));
        }
        Ok(())
    }

    fn mark(&mut self, n: u64) {
        self.last_emitted = Some(n);
        self.any_emitted = true;
    }
}

fn format_line(name: &str, n: u64, sep: char, text: &[u8]) -> String {
    format!("{name}{sep}{n}{sep} {}", String::from_utf8_lossy(text))
}

/// Maps an I/O failure while reading a file that was already opened to a fatal error.
pub fn read_error(name: &str, e: std::io::Error) -> Stop {
    Stop::Failed(ToolError::fatal(format!(
        "cannot read {name}: {}",
        e.kind()
    )))
}
