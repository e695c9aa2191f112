//! What one process knows of the shared buckets between two visits to the store: the arrival
//! time it last read and the calls it admitted since without counting them there yet.
//!
//! # The rule of local admission
//!
//! A call is admitted without a store round trip only while every bucket it is counted against
//! is far from its limit as last read — at least [`MIN_HEADROOM`] calls of headroom — and this
//! process's uncounted calls stay within 1/[`MIN_HEADROOM`] of that headroom, and the reading is
//! at most [`FRESH`] old (or a visit to the store is under way, up to [`STALE`]). Uncounted calls
//! are counted in the store at the next visit ([`super::RateLimiter::flush`] every [`FRESH`]).
//! So nearer a limit than that every call is counted in the store before it runs (the limit is
//! exact), and far from it R processes whose readings are all stale at once admit at most
//! R/16 of the headroom they read beyond it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Headroom, in calls, below which every call is counted in the store first.
pub(super) const MIN_HEADROOM: f64 = 16.0;
/// How long a reading admits calls locally.
pub(super) const FRESH: Duration = Duration::from_millis(20);
/// How long a reading admits calls locally while a visit to the store is under way.
pub(super) const STALE: Duration = Duration::from_secs(1);
/// Most buckets remembered per process (beyond it the view is dropped: it only saves visits).
const MAX_BUCKETS: usize = 100_000;

/// One bucket as this process last read it.
#[derive(Debug)]
pub(super) struct Seen {
    /// The bucket's arrival time in the store, on this host's clock (seconds).
    pub tat: f64,
    /// When it was read.
    pub read_at: Instant,
    /// Calls admitted here and not yet counted in the store.
    pub pending: std::cell::Cell<u32>,
    /// A visit to the store is under way for this bucket.
    pub visiting: bool,
    /// The bucket's limit (to count pending calls at a later visit).
    pub rate: bulkhead_vocab::RateLimit,
}

impl Seen {
    /// Whether one more call may be admitted here without visiting the store.
    pub fn admits(&self, interval: f64, tolerance: f64, now: f64) -> bool {
        let age = self.read_at.elapsed();
        if age > STALE || (!self.visiting && age > FRESH) {
            return false;
        }
        let headroom = (tolerance - (self.tat.max(now) - now)) / interval;
        headroom >= MIN_HEADROOM && f64::from(self.pending.get() + 1) <= headroom / MIN_HEADROOM
    }
}

/// The process's view of every bucket it used recently (keys hashed with a per-map random seed).
#[derive(Debug, Default)]
pub(super) struct View {
    pub seen: HashMap<String, Seen, foldhash::fast::RandomState>,
}

impl View {
    /// Records a reading of `key` (keeping calls admitted while the visit was under way).
    pub fn read(&mut self, key: &str, tat: f64, rate: bulkhead_vocab::RateLimit) {
        if self.seen.len() >= MAX_BUCKETS && !self.seen.contains_key(key) {
            // Dropping readings loses nothing but their pending calls' count, so keep those.
            self.seen.retain(|_, s| s.pending.get() > 0);
        }
        let s = self.seen.entry(key.to_owned()).or_insert(Seen {
            tat,
            read_at: Instant::now(),
            pending: Default::default(),
            visiting: false,
            rate,
        });
        s.tat = tat;
        s.read_at = Instant::now();
        s.visiting = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(tat: f64, pending: u32) -> Seen {
        Seen {
            tat,
            read_at: Instant::now(),
            pending: std::cell::Cell::new(pending),
            visiting: false,
            rate: bulkhead_vocab::RateLimit {
                calls: 100,
                per_seconds: 1,
                burst: None,
            },
        }
    }

    #[test]
    fn far_from_the_limit_a_share_of_the_headroom_is_admitted_here() {
        // 100 calls/s, burst 100: an idle bucket has 100 calls of headroom, so up to 6 here.
        let (interval, tolerance, now) = (0.01, 0.99, 1000.0);
        assert!(seen(0.0, 0).admits(interval, tolerance, now));
        assert!(seen(0.0, 5).admits(interval, tolerance, now));
        assert!(!seen(0.0, 6).admits(interval, tolerance, now));
        // 85 calls used: 15 left, under the 16 that local admission needs: to the store.
        assert!(!seen(now + 0.85, 0).admits(interval, tolerance, now));
        // A stale reading admits nothing; one under a visit, for a while.
        let mut old = seen(0.0, 0);
        old.read_at = Instant::now() - FRESH * 2;
        assert!(!old.admits(interval, tolerance, now));
        old.visiting = true;
        assert!(old.admits(interval, tolerance, now));
    }
}
