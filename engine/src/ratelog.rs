//! Log lines a client can trigger at will (refused tokens, refused sessions, tool errors) are
//! rate-limited: at most one line per site per second, carrying the count of lines left out, so
//! a flood cannot fill the log.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One call site's limiter (a `static`).
#[derive(Debug)]
pub struct Limiter {
    last_ms: AtomicU64,
    suppressed: AtomicU64,
}

/// Shortest gap between two lines of one site, in milliseconds.
const GAP_MS: u64 = 1_000;

fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + GAP_MS
}

impl Limiter {
    /// A limiter that lets the first line through.
    pub const fn new() -> Limiter {
        Limiter {
            last_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(lines left out since the last one)` when a line may be written now.
    pub fn allow(&self) -> Option<u64> {
        let now = now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= GAP_MS
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::AcqRel));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_second_and_the_rest_counted() {
        let l = Limiter::new();
        assert_eq!(l.allow(), Some(0));
        for _ in 0..1000 {
            assert_eq!(l.allow(), None);
        }
        l.last_ms.store(0, Ordering::Relaxed);
        assert_eq!(l.allow(), Some(1000));
    }
}
