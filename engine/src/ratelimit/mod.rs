//! Calls over time, shared by every instance and replica of a trust domain.
//!
//! # The rule (enforced here, and only here)
//!
//! A call (a tool call, a resource read, a prompt get) runs only after it was counted against
//! every limit that applies to it — `rate_limits.per_user`, `per_user_tool` (or the tool's own
//! `rate_limit:`), `per_tool`, `per_server` — all or none. The state store keeps one GCRA bucket
//! per (limit, user, server, tool): its theoretical arrival time. So N replicas share one
//! budget, not N. Near a limit every call is counted in the store before it runs (at most one
//! round trip); far from it a process may admit a bounded share of the headroom it last read and
//! count those calls within [`local::FRESH`] (the rule and its bound: [`local`]).
//!
//! # Faults
//!
//! A store slower than `rate_limits.store_timeout_ms`, or down, refuses the call (fail closed,
//! retryable): a limit that cannot be counted is not a limit (calls far from their limit may
//! still be admitted from a reading taken before, for at most [`local::STALE`]). A crash loses
//! calls admitted locally and not yet counted: at most 1/16 of the headroom the process read,
//! never near a limit. A call counted and then not run costs its user one call of budget.

mod local;
mod postgres;
mod sqlite;

use crate::config::RateLimitsConfig;
use crate::state::StateStore;
use bulkhead_vocab::RateLimit;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a call is, for the limits.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    /// The caller's user id.
    pub user: &'a str,
    /// The tool's name (`resource:<name>` for a resource's read, `prompt:<name>` for a prompt).
    pub tool: &'a str,
    /// The tool's own limit, which replaces `per_user_tool` for it.
    pub own: Option<RateLimit>,
}

/// Why a call was not counted.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RateRefusal {
    /// A limit is used up until `retry_after` has passed.
    #[error("rate limit `{limit}` ({rate}) reached; retry in {:.3} s", retry_after.as_secs_f64())]
    Limited {
        /// The limit's name as configured (`rate_limits.per_user_tool`, or `the tool's rate_limit`).
        limit: &'static str,
        /// The limit.
        rate: RateLimit,
        /// When the call would be admitted.
        retry_after: Duration,
    },
    /// The store did not count the call in time, or failed (the detail may name hosts: logs only).
    #[error("rate limits cannot be counted: {0}")]
    Store(String),
}

impl RateRefusal {
    /// What the caller may read (no host names).
    pub fn for_caller(&self, what: &str) -> String {
        match self {
            RateRefusal::Limited {
                limit,
                rate,
                retry_after,
            } => format!(
                "rate limit reached for `{what}`: {limit} allows {rate}; retry in {:.3} s",
                retry_after.as_secs_f64()
            ),
            RateRefusal::Store(_) => format!(
                "rate limits cannot be counted right now (the state store is slow or down), so `{what}` is refused; retry in a moment"
            ),
        }
    }

    /// The metric label: the limit's name, or `store`.
    pub fn label(&self) -> &'static str {
        match self {
            RateRefusal::Limited { limit, .. } => limit,
            RateRefusal::Store(_) => "store",
        }
    }
}

/// One bucket a call is counted against.
#[derive(Clone, Debug)]
struct Bucket {
    key: String,
    limit: &'static str,
    rate: RateLimit,
}

/// The buckets' order in one take: sorted by key (rows are locked in this order).
fn sorted(mut b: Vec<Bucket>) -> Vec<Bucket> {
    b.sort_by(|x, y| x.key.cmp(&y.key));
    b.dedup_by(|x, y| x.key == y.key);
    b
}

/// Where buckets are kept.
enum Backend {
    Sqlite(sqlite::SqliteBuckets),
    Postgres(postgres::PgBuckets),
}

/// One visit to the store: each bucket gets its `forced` calls (admitted here already) counted
/// unconditionally, then `want` more all or none.
pub(super) struct Visit<'a> {
    buckets: &'a [Bucket],
    forced: Vec<u32>,
    want: u32,
}

/// What a visit found: the refusing bucket and the wait (when `want` was refused), and every
/// bucket's arrival time after the visit, on this host's clock.
pub(super) struct Counted {
    refused: Option<(usize, f64)>,
    tats: Vec<f64>,
}

/// The limits of one server, counted in its trust domain's store.
pub struct RateLimiter {
    config: RateLimitsConfig,
    server: String,
    inner: Option<Arc<Inner>>,
}

struct Inner {
    backend: Backend,
    timeout: Duration,
    view: Mutex<local::View>,
    /// Wakes the flusher, which sleeps while no call waits to be counted (see
    /// [`Inner::flush`]); notified when a bucket's uncounted calls go from none to some, and
    /// when the limiter goes.
    uncounted: Arc<tokio::sync::Notify>,
    /// Rounds of the flusher so far (how often an idle process woke for rate limits).
    flushes: std::sync::atomic::AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.uncounted.notify_one();
    }
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("server", &self.server)
            .field("config", &self.config)
            .finish()
    }
}

/// A call's buckets: key ranges in a scratch string, limit names, rates (at most four).
#[derive(Default)]
struct Plan {
    items: [Option<(std::ops::Range<usize>, &'static str, RateLimit)>; 4],
    len: usize,
}

thread_local! {
    /// Where a call's bucket keys are written (reused: no allocation per call).
    static SCRATCH: std::cell::RefCell<String> = std::cell::RefCell::new(String::with_capacity(256));
}

/// The separator inside bucket keys (never in a user id, server or tool name).
const SEP: char = '\u{1f}';

/// Seconds since the epoch on this host's clock.
fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

impl RateLimiter {
    /// No limits at all (tests; a server whose configuration declares none and no tool of
    /// which declares its own).
    pub fn none(server: &str) -> RateLimiter {
        RateLimiter {
            config: RateLimitsConfig::default(),
            server: server.to_owned(),
            inner: None,
        }
    }

    /// The limits of `server` from `config`, counted in `store` (the SQLite store's shared file,
    /// or the PostgreSQL store's database). `any_own` says whether any tool declares its own.
    /// Inside a tokio runtime, a task counts calls admitted locally in the store every
    /// [`local::FRESH`] while the limiter lives.
    pub fn open(
        config: &RateLimitsConfig,
        server: &str,
        store: &StateStore,
        any_own: bool,
    ) -> Result<RateLimiter, String> {
        let timeout = Duration::from_millis(config.store_timeout_ms.max(1));
        let mut limiter = RateLimiter::none(server);
        limiter.config = config.clone();
        if config.declared().next().is_none() && !any_own {
            return Ok(limiter);
        }
        let backend = match store {
            StateStore::Sqlite(s) => Backend::Sqlite(
                sqlite::SqliteBuckets::open(s.path(), timeout)
                    .map_err(|e| format!("rate limits: {e}"))?,
            ),
            StateStore::Postgres(p) => Backend::Postgres(postgres::PgBuckets::new(
                p.pool().clone(),
                p.target().clone(),
                p.scope().to_owned(),
            )),
        };
        let uncounted = Arc::new(tokio::sync::Notify::new());
        let inner = Arc::new(Inner {
            backend,
            timeout,
            view: Mutex::default(),
            uncounted: uncounted.clone(),
            flushes: Default::default(),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&inner);
            rt.spawn(async move {
                // Twice per freshness window, so that under steady traffic readings are renewed
                // by the flush before calls find them stale.
                let mut tick = tokio::time::interval(local::FRESH / 2);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(inner) = weak.upgrade() else { return };
                    let more = inner.flush().await;
                    drop(inner);
                    if !more {
                        // Nothing left to count: sleep until a call is admitted uncounted (a
                        // permit stored meanwhile ends the wait at once) or the limiter goes.
                        uncounted.notified().await;
                        tick.reset();
                    }
                }
            });
        }
        limiter.inner = Some(inner);
        Ok(limiter)
    }

    /// The buckets `subject` is counted against: their keys written into `scratch` (no
    /// allocation once it has grown), with each limit's name and rate.
    fn plan(&self, s: &Subject<'_>, scratch: &mut String) -> Plan {
        let c = &self.config;
        let server = &self.server;
        let mut plan = Plan::default();
        let mut push = |parts: &[&str], limit: &'static str, rate: RateLimit| {
            let from = scratch.len();
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    scratch.push(SEP);
                }
                scratch.push_str(p);
            }
            plan.items[plan.len] = Some((from..scratch.len(), limit, rate));
            plan.len += 1;
        };
        if let Some(rate) = c.per_user {
            push(&["u", s.user], "rate_limits.per_user", rate);
        }
        let user_tool = match s.own {
            Some(rate) => Some(("the tool's rate_limit", rate)),
            None => c.per_user_tool.map(|r| ("rate_limits.per_user_tool", r)),
        };
        if let Some((limit, rate)) = user_tool {
            push(&["ut", s.user, server, s.tool], limit, rate);
        }
        if let Some(rate) = c.per_tool {
            push(&["t", server, s.tool], "rate_limits.per_tool", rate);
        }
        if let Some(rate) = c.per_server {
            push(&["s", server], "rate_limits.per_server", rate);
        }
        plan
    }

    /// Counts one call of `subject` against every limit that applies, all or none: locally
    /// while every bucket is far from its limit (see [`local`]), else in the store first.
    pub async fn take(&self, subject: Subject<'_>) -> Result<(), RateRefusal> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        let now = now_secs();
        let decided = SCRATCH.with_borrow_mut(|scratch| {
            scratch.clear();
            let plan = self.plan(&subject, scratch);
            let items = || plan.items.iter().flatten();
            if plan.len == 0 {
                return None;
            }
            let mut view = inner.view.lock().unwrap_or_else(|p| p.into_inner());
            // One lookup per bucket: the readings that admit the call, or none.
            let mut admitting: [Option<&local::Seen>; 4] = [None; 4];
            let local = items().enumerate().all(|(i, (r, _, rate))| {
                let seen = view.seen.get(&scratch[r.clone()]);
                admitting[i] =
                    seen.filter(|s| s.admits(rate.interval_secs(), rate.tolerance_secs(), now));
                admitting[i].is_some()
            });
            if local {
                let mut first = false;
                for s in admitting.iter().flatten() {
                    first |= s.pending.get() == 0;
                    s.pending.set(s.pending.get() + 1);
                }
                drop(view);
                if first {
                    inner.uncounted.notify_one();
                }
                return None;
            }
            let buckets = sorted(
                items()
                    .map(|(r, limit, rate)| Bucket {
                        key: scratch[r.clone()].to_owned(),
                        limit,
                        rate: *rate,
                    })
                    .collect(),
            );
            let forced: Vec<u32> = buckets
                .iter()
                .map(|b| match view.seen.get_mut(&b.key) {
                    Some(s) => {
                        s.visiting = true;
                        s.pending.take()
                    }
                    None => 0,
                })
                .collect();
            Some((buckets, forced))
        });
        let Some((buckets, forced)) = decided else {
            return Ok(());
        };
        crate::failpoint!("ratelimit.before_take");
        let visit = Visit {
            buckets: &buckets,
            forced,
            want: 1,
        };
        // Boxed: a store visit is the rare path (far from a limit a call is admitted above), and
        // its future inline would make every call's future larger.
        match Box::pin(inner.visit(&visit)).await {
            Ok(Counted { refused: None, .. }) => Ok(()),
            Ok(Counted {
                refused: Some((i, wait)),
                ..
            }) => {
                let b = &buckets[i];
                Err(RateRefusal::Limited {
                    limit: b.limit,
                    rate: b.rate,
                    retry_after: Duration::from_secs_f64(wait.max(0.001)),
                })
            }
            Err(e) => Err(RateRefusal::Store(e)),
        }
    }
}

impl Inner {
    /// Visits the store within the timeout and records what it read; on failure the forced
    /// calls go back to pending (they ran; they are counted at the next visit).
    async fn visit(&self, v: &Visit<'_>) -> Result<Counted, String> {
        let r = match &self.backend {
            Backend::Sqlite(s) => s.take(v),
            Backend::Postgres(p) => match tokio::time::timeout(self.timeout, p.take(v)).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "the store did not answer within rate_limits.store_timeout_ms ({} ms)",
                    self.timeout.as_millis()
                )),
            },
        };
        let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        match &r {
            Ok(c) => {
                for (b, tat) in v.buckets.iter().zip(&c.tats) {
                    view.read(&b.key, *tat, b.rate);
                }
            }
            Err(_) => {
                for (b, n) in v.buckets.iter().zip(&v.forced) {
                    if let Some(s) = view.seen.get_mut(&b.key) {
                        s.pending.set(s.pending.get() + n);
                        s.visiting = false;
                    }
                }
                drop(view);
                if v.forced.iter().any(|&n| n > 0) {
                    self.uncounted.notify_one();
                }
            }
        }
        r
    }

    /// Counts in the store the calls admitted locally whose reading is older than half of
    /// [`local::FRESH`] (a visit of their own, wanting nothing more), renewing the readings.
    /// Returns whether calls are still uncounted after it (the flusher sleeps when none are).
    async fn flush(&self) -> bool {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut more = false;
        let due: Vec<(Bucket, u32)> = {
            let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
            view.seen
                .iter_mut()
                .filter(|(_, s)| {
                    let due = s.pending.get() > 0
                        && !s.visiting
                        && s.read_at.elapsed() >= local::FRESH / 2;
                    more |= s.pending.get() > 0 && !due;
                    due
                })
                .map(|(k, s)| {
                    s.visiting = true;
                    let rate = s.rate;
                    (
                        Bucket {
                            key: k.clone(),
                            limit: "",
                            rate,
                        },
                        s.pending.take(),
                    )
                })
                .collect()
        };
        if due.is_empty() {
            return more;
        }
        let (buckets, forced): (Vec<Bucket>, Vec<u32>) = due.into_iter().unzip();
        let visit = Visit {
            buckets: &buckets,
            forced,
            want: 0,
        };
        if let Err(e) = self.visit(&visit).await {
            tracing::warn!(error = %e, "rate limits: calls admitted locally not yet counted in the store");
            // The visit put them back: count them at the next tick.
            return true;
        }
        more
    }
}

/// Rounding slack of the decision, in seconds: a call exactly on its schedule is admitted.
const EPSILON: f64 = 1e-9;

/// The GCRA decision of one visit over buckets whose stored arrival times are `tats` (0 for a
/// new bucket), at `now` (seconds): each bucket's forced calls are counted unconditionally; then
/// `want` more are admitted only if every bucket admits them, else the bucket that makes the
/// caller wait longest and that wait are returned. The PostgreSQL function `bulkhead_rate_take`
/// is the same decision in SQL.
fn decide(v: &Visit<'_>, tats: &[f64], now: f64) -> Counted {
    let mut after = Vec::with_capacity(v.buckets.len());
    let mut worst: Option<(usize, f64)> = None;
    for (i, (b, tat)) in v.buckets.iter().zip(tats).enumerate() {
        let t = tat.max(now) + f64::from(v.forced[i]) * b.rate.interval_secs();
        let ahead = t - now - b.rate.tolerance_secs();
        if v.want > 0 && ahead > EPSILON && worst.is_none_or(|(_, w)| ahead > w) {
            worst = Some((i, ahead));
        }
        after.push(t);
    }
    if worst.is_none() {
        for (t, b) in after.iter_mut().zip(v.buckets) {
            *t += f64::from(v.want) * b.rate.interval_secs();
        }
    }
    Counted {
        refused: worst,
        tats: after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Calls admitted locally are counted in the store within a few flushes; then, with nothing
    /// uncounted, the flusher sleeps (an idle process does not wake for rate limits) until the
    /// next such call wakes it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn local_calls_are_counted_then_the_flusher_sleeps() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::create_sqlite(
            &dir.path().join("state.db"),
            crate::state::StoreOptions::new("t"),
        )
        .unwrap();
        // One call per second with a burst of 1000: far from the limit, so calls are admitted
        // locally, and each call counted moves the bucket's arrival time by one second.
        let rate = RateLimit {
            calls: 1,
            per_seconds: 1,
            burst: Some(1000),
        };
        let config = RateLimitsConfig {
            per_user_tool: Some(rate),
            ..Default::default()
        };
        let limiter = RateLimiter::open(&config, "srv", &store, false).unwrap();
        let inner = limiter.inner.clone().unwrap();
        let subject = Subject {
            user: "ana",
            tool: "read_file",
            own: None,
        };
        let start = now_secs();
        let quiet = |inner: &Inner| {
            let view = inner.view.lock().unwrap();
            view.seen
                .values()
                .all(|s| s.pending.get() == 0 && !s.visiting)
        };
        let counted = |inner: &Inner| {
            let key = inner
                .view
                .lock()
                .unwrap()
                .seen
                .keys()
                .next()
                .cloned()
                .unwrap();
            let b = [Bucket {
                key,
                limit: "",
                rate,
            }];
            let v = Visit {
                buckets: &b,
                forced: vec![0],
                want: 0,
            };
            let Backend::Sqlite(b) = &inner.backend else {
                unreachable!()
            };
            // Each call counted moved the arrival time one second past the first call's time
            // (it stays ahead of the clock): the whole seconds past `start` are the calls.
            (b.take(&v).unwrap().tats[0] - start).floor() as i64
        };
        let until = |what: &str, f: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !f() {
                assert!(Instant::now() < deadline, "{what} within 10 s");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        for _ in 0..40 {
            limiter.take(subject).await.unwrap();
        }
        until("the 40 calls counted", &|| quiet(&inner));
        assert_eq!(counted(&inner), 40);
        // Idle: a flush or two more at most (one for a wake-up stored while it worked, one
        // that finds nothing), then none; a flusher that keeps ticking flushes 50 times.
        std::thread::sleep(local::FRESH * 2);
        let before = inner.flushes.load(std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(500));
        let after = inner.flushes.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            after - before <= 3,
            "an idle limiter flushed {} times in 500 ms",
            after - before
        );
        // A call admitted locally wakes it again.
        for _ in 0..5 {
            limiter.take(subject).await.unwrap();
        }
        until("the 5 later calls counted", &|| quiet(&inner));
        assert_eq!(counted(&inner), 45);
    }

    fn bucket(calls: u32, per_seconds: u32, burst: Option<u32>) -> Bucket {
        Bucket {
            key: "k".into(),
            limit: "rate_limits.per_user",
            rate: RateLimit {
                calls,
                per_seconds,
                burst,
            },
        }
    }

    fn one(buckets: &[Bucket], tats: &[f64], now: f64) -> Counted {
        let v = Visit {
            buckets,
            forced: vec![0; buckets.len()],
            want: 1,
        };
        decide(&v, tats, now)
    }

    #[test]
    fn a_burst_then_the_sustained_rate() {
        let b = [bucket(10, 1, Some(3))];
        let mut tat = 0.0;
        let now = 1000.0;
        for _ in 0..3 {
            let c = one(&b, &[tat], now);
            assert!(c.refused.is_none());
            tat = c.tats[0];
        }
        let (i, wait) = one(&b, &[tat], now).refused.unwrap();
        assert_eq!(i, 0);
        assert!((wait - 0.1).abs() < 1e-6, "{wait}");
        assert!(one(&b, &[tat], now + 0.1).refused.is_none());
    }

    #[test]
    fn all_or_none_and_the_longest_wait_is_named() {
        let b = [bucket(1, 10, None), bucket(100, 1, None)];
        let next = one(&b, &[0.0, 0.0], 50.0).tats;
        let c = one(&b, &next, 50.0);
        let (i, wait) = c.refused.unwrap();
        assert_eq!(i, 0);
        assert!((wait - 10.0).abs() < 1e-9);
        assert_eq!(c.tats, next, "a refused call counts in no bucket");
    }

    #[test]
    fn forced_calls_count_even_when_the_wanted_one_is_refused() {
        let b = [bucket(10, 1, Some(2))];
        let v = Visit {
            buckets: &b,
            forced: vec![2],
            want: 1,
        };
        let c = decide(&v, &[0.0], 100.0);
        assert!(c.refused.is_some());
        assert!((c.tats[0] - 100.2).abs() < 1e-9);
    }
}
