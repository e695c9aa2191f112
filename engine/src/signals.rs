//! One call's signals between the wrapper, the work it runs (a connector or a handler) and the
//! protocol layer: progress so far, whether the caller went away, and warnings for the client's
//! log. Everything here is lock-free or bounded: a connector ticks from its blocking thread, the
//! protocol layer reads at its own pace, and nothing grows with the size of the work.
//!
//! The one invariant kept here: once a call's future is dropped (the caller cancelled, the
//! request went away) [`CallSignals::is_stopped`] is true, and every producer checks it at each
//! [`tick`](CallSignals::advance) boundary, so no work outlives its caller by more than one tick.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Warnings kept per call; later ones are counted and summarised.
pub const MAX_WARNINGS: usize = 20;
/// The longest warning text kept (longer ones are cut).
const MAX_WARNING_BYTES: usize = 512;

/// What a call's progress counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Unit {
    /// Bytes read (log and file searches, HTTP bodies).
    Bytes = 1,
    /// Rows produced (SQL queries).
    Rows = 2,
    /// Steps of a handler tool's own choosing.
    Steps = 3,
}

impl Unit {
    fn from_u8(v: u8) -> Option<Unit> {
        match v {
            1 => Some(Unit::Bytes),
            2 => Some(Unit::Rows),
            3 => Some(Unit::Steps),
            _ => None,
        }
    }
}

/// A snapshot of a call's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Work done so far.
    pub done: u64,
    /// The whole work, when known.
    pub total: Option<u64>,
    /// What `done` and `total` count.
    pub unit: Unit,
}

impl Progress {
    /// A short human message (`"120.0 MiB of 1.0 GiB read"`, `"4500 rows"`).
    pub fn message(&self) -> String {
        match (self.unit, self.total) {
            (Unit::Bytes, Some(t)) => format!("{} of {} read", human(self.done), human(t)),
            (Unit::Bytes, None) => format!("{} read", human(self.done)),
            (Unit::Rows, _) => format!("{} rows", self.done),
            (Unit::Steps, Some(t)) => format!("{} of {t} steps", self.done),
            (Unit::Steps, None) => format!("{} steps", self.done),
        }
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

#[derive(Default)]
struct Warnings {
    kept: Vec<String>,
    dropped: u64,
}

#[derive(Default)]
struct Inner {
    stopped: AtomicBool,
    done: AtomicU64,
    /// `u64::MAX` while unknown.
    total: AtomicU64,
    unit: AtomicU8,
    warnings: Mutex<Warnings>,
}

/// The signals of one call; cheap to clone (all clones see the same call).
#[derive(Clone)]
pub struct CallSignals(Arc<Inner>);

impl Default for CallSignals {
    fn default() -> Self {
        CallSignals::new()
    }
}

impl std::fmt::Debug for CallSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSignals")
            .field("stopped", &self.is_stopped())
            .field("progress", &self.progress())
            .finish()
    }
}

impl CallSignals {
    /// Fresh signals: not stopped, no progress, no warnings.
    pub fn new() -> CallSignals {
        let inner = Inner {
            total: AtomicU64::new(u64::MAX),
            ..Inner::default()
        };
        CallSignals(Arc::new(inner))
    }

    /// Asks the work to stop (the caller went away).
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::Release);
    }

    /// Whether the work should stop now.
    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::Acquire)
    }

    /// A guard that stops the work when dropped: the wrapper holds one for the life of the call
    /// future, so dropping the call (cancellation) reaches the blocking threads doing its work.
    pub fn stop_on_drop(&self) -> StopOnDrop {
        StopOnDrop(self.clone())
    }

    /// Declares what progress counts and the whole, when known.
    pub fn set_total(&self, unit: Unit, total: Option<u64>) {
        self.0.unit.store(unit as u8, Ordering::Relaxed);
        self.0
            .total
            .store(total.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Adds `n` to the work done (in the declared unit; bytes when none was declared).
    pub fn advance(&self, n: u64) {
        if self.0.unit.load(Ordering::Relaxed) == 0 {
            self.0.unit.store(Unit::Bytes as u8, Ordering::Relaxed);
        }
        self.0.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Sets the work done (for a handler that counts its own steps).
    pub fn set_done(&self, unit: Unit, done: u64) {
        self.0.unit.store(unit as u8, Ordering::Relaxed);
        self.0.done.store(done, Ordering::Relaxed);
    }

    /// Raises the work done to `done` unless it is already past it (for reports that may
    /// arrive out of order, such as an upstream server's notifications).
    pub fn raise_done(&self, unit: Unit, done: u64) {
        self.0.unit.store(unit as u8, Ordering::Relaxed);
        self.0.done.fetch_max(done, Ordering::Relaxed);
    }

    /// Progress so far; `None` until the work has reported any.
    pub fn progress(&self) -> Option<Progress> {
        let unit = Unit::from_u8(self.0.unit.load(Ordering::Relaxed))?;
        let total = self.0.total.load(Ordering::Relaxed);
        Some(Progress {
            done: self.0.done.load(Ordering::Relaxed),
            total: (total != u64::MAX).then_some(total),
            unit,
        })
    }

    /// Records a warning for the client's log. It must never carry argument values or host
    /// paths: connectors name files by their name in the declared directory only. At most
    /// [`MAX_WARNINGS`] are kept per call; the rest are counted.
    pub fn warn(&self, text: impl Into<String>) {
        let mut text = text.into();
        if text.len() > MAX_WARNING_BYTES {
            let mut cut = MAX_WARNING_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        let mut w = self.0.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if w.kept.len() < MAX_WARNINGS {
            w.kept.push(text);
        } else {
            w.dropped += 1;
        }
    }

    /// Takes the warnings recorded since the last call (a summary line for those over the cap).
    pub fn take_warnings(&self) -> Vec<String> {
        let mut w = self.0.warnings.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::mem::take(&mut w.kept);
        if w.dropped > 0 {
            out.push(format!("{} more warnings not shown", w.dropped));
            w.dropped = 0;
        }
        out
    }
}

/// Stops its call's work when dropped (see [`CallSignals::stop_on_drop`]).
pub struct StopOnDrop(CallSignals);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_guard_stops_every_clone() {
        let s = CallSignals::new();
        let seen = s.clone();
        {
            let _g = s.stop_on_drop();
            assert!(!seen.is_stopped());
        }
        assert!(seen.is_stopped());
    }

    #[test]
    fn warnings_are_bounded_and_summarised() {
        let s = CallSignals::new();
        for i in 0..(MAX_WARNINGS + 5) {
            s.warn(format!("w{i} {}", "x".repeat(2000)));
        }
        let w = s.take_warnings();
        assert_eq!(w.len(), MAX_WARNINGS + 1);
        assert!(w[0].len() <= MAX_WARNING_BYTES + '…'.len_utf8());
        assert_eq!(w.last().unwrap(), "5 more warnings not shown");
        assert!(s.take_warnings().is_empty());
    }

    #[test]
    fn progress_appears_once_reported() {
        let s = CallSignals::new();
        assert_eq!(s.progress(), None);
        s.set_total(Unit::Bytes, Some(3 << 20));
        s.advance(1 << 20);
        let p = s.progress().unwrap();
        assert_eq!((p.done, p.total), (1 << 20, Some(3 << 20)));
        assert_eq!(p.message(), "1.0 MiB of 3.0 MiB read");
    }
}
