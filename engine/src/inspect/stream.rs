//! Redacting a byte stream that arrives in chunks of any size: a credential may straddle two
//! chunks, so the last `window` bytes are held back and scanned again with what follows. A
//! credential found across the hold-back line is emitted whole (redacted); one that starts after
//! it waits for the next round. Bounded: at most two windows are held at once.

use super::rules::Rules;
use super::scan::{Hit, placeholder};

/// What a stream's redaction holds between chunks.
pub struct StreamRedactor<'r> {
    rules: &'r Rules,
    window: usize,
    held: Vec<u8>,
    found: Vec<&'static str>,
}

impl<'r> StreamRedactor<'r> {
    /// Holds back `window` bytes (the longest credential it finds across chunk boundaries).
    pub fn new(rules: &'r Rules, window: usize) -> StreamRedactor<'r> {
        StreamRedactor {
            rules,
            window: window.max(1),
            held: Vec::new(),
            found: Vec::new(),
        }
    }

    /// Takes one chunk; returns the bytes that are final (redacted), possibly none.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        if self.held.len() < 2 * self.window {
            return Vec::new();
        }
        let hits = self.rules.find(&self.held);
        let mut line = self.held.len() - self.window;
        for h in &hits {
            if h.start < line && h.end > line {
                line = h.end;
            }
        }
        let emitted = self.emit(&hits, line);
        self.held.drain(..line);
        emitted
    }

    /// The rest, at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        let hits = self.rules.find(&self.held);
        let line = self.held.len();
        let out = self.emit(&hits, line);
        self.held.clear();
        out
    }

    /// The rules found so far (each once).
    pub fn found(&self) -> &[&'static str] {
        &self.found
    }

    fn emit(&mut self, hits: &[Hit], line: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(line);
        let mut at = 0;
        for h in hits.iter().filter(|h| h.end <= line) {
            out.extend_from_slice(&self.held[at..h.start.max(at)]);
            out.extend_from_slice(placeholder(h.rule).as_bytes());
            at = h.end;
            if !self.found.contains(&h.rule) {
                self.found.push(h.rule);
            }
        }
        out.extend_from_slice(&self.held[at..line]);
        out
    }
}
