//! Calls over time, shared by every instance and replica of a trust domain.
//!
//! # The rule (enforced here, and only here)
//!
//! A call (a tool call, a resource read, a prompt get) runs only after it was counted against
//! every limit that applies to it — `rate_limits.per_user`, `per_user_tool` (or the tool's own
//! `rate_limit:`), `per_tool`, `per_server` — in the state store, all or none, in one round trip.
//! The store keeps one GCRA bucket per (limit, user, server, tool): its theoretical arrival
//! time. So N replicas share one budget, not N, and the process keeps nothing per user.
//!
//! # Faults
//!
//! A store slower than `rate_limits.store_timeout_ms`, or down, refuses the call (fail closed,
//! retryable): a limit that cannot be counted is not a limit. A crash loses nothing that matters:
//! a call counted and then not run only costs its user one call of budget.

mod postgres;
mod sqlite;

use crate::config::RateLimitsConfig;
use crate::state::StateStore;
use bulkhead_vocab::RateLimit;
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

    /// The seconds to wait before retrying, rounded up (HTTP `Retry-After`).
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            RateRefusal::Limited { retry_after, .. } => {
                retry_after.as_secs_f64().ceil().max(1.0) as u64
            }
            RateRefusal::Store(_) => 1,
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

/// The limits of one server, counted in its trust domain's store.
pub struct RateLimiter {
    config: RateLimitsConfig,
    server: String,
    backend: Option<Backend>,
    timeout: Duration,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("server", &self.server)
            .field("config", &self.config)
            .finish()
    }
}

/// The separator inside bucket keys (never in a user id, server or tool name).
const SEP: char = '\u{1f}';

impl RateLimiter {
    /// No limits at all (tests; a server whose configuration declares none and no tool of
    /// which declares its own).
    pub fn none(server: &str) -> RateLimiter {
        RateLimiter {
            config: RateLimitsConfig::default(),
            server: server.to_owned(),
            backend: None,
            timeout: Duration::from_millis(500),
        }
    }

    /// The limits of `server` from `config`, counted in `store` (the SQLite store's shared file,
    /// or the PostgreSQL store's database). `any_own` says whether any tool declares its own.
    pub fn open(
        config: &RateLimitsConfig,
        server: &str,
        store: &StateStore,
        any_own: bool,
    ) -> Result<RateLimiter, String> {
        let timeout = Duration::from_millis(config.store_timeout_ms.max(1));
        let mut limiter = RateLimiter {
            config: config.clone(),
            server: server.to_owned(),
            backend: None,
            timeout,
        };
        if config.declared().next().is_none() && !any_own {
            return Ok(limiter);
        }
        limiter.backend = Some(match store {
            StateStore::Sqlite(s) => Backend::Sqlite(
                sqlite::SqliteBuckets::open(s.path(), timeout)
                    .map_err(|e| format!("rate limits: {e}"))?,
            ),
            StateStore::Postgres(p) => Backend::Postgres(postgres::PgBuckets::new(
                p.pool().clone(),
                p.scope().to_owned(),
            )),
        });
        Ok(limiter)
    }

    /// The buckets `subject` is counted against.
    fn buckets(&self, s: &Subject<'_>) -> Vec<Bucket> {
        let c = &self.config;
        let server = &self.server;
        let mut out = Vec::with_capacity(4);
        if let Some(rate) = c.per_user {
            out.push(Bucket {
                key: format!("u{SEP}{}", s.user),
                limit: "rate_limits.per_user",
                rate,
            });
        }
        let user_tool = match s.own {
            Some(rate) => Some(("the tool's rate_limit", rate)),
            None => c.per_user_tool.map(|r| ("rate_limits.per_user_tool", r)),
        };
        if let Some((limit, rate)) = user_tool {
            out.push(Bucket {
                key: format!("ut{SEP}{}{SEP}{server}{SEP}{}", s.user, s.tool),
                limit,
                rate,
            });
        }
        if let Some(rate) = c.per_tool {
            out.push(Bucket {
                key: format!("t{SEP}{server}{SEP}{}", s.tool),
                limit: "rate_limits.per_tool",
                rate,
            });
        }
        if let Some(rate) = c.per_server {
            out.push(Bucket {
                key: format!("s{SEP}{server}"),
                limit: "rate_limits.per_server",
                rate,
            });
        }
        sorted(out)
    }

    /// Counts one call of `subject` against every limit that applies, all or none.
    pub async fn take(&self, subject: Subject<'_>) -> Result<(), RateRefusal> {
        let Some(backend) = &self.backend else {
            return Ok(());
        };
        let buckets = self.buckets(&subject);
        if buckets.is_empty() {
            return Ok(());
        }
        crate::failpoint!("ratelimit.before_take");
        let taken = match backend {
            Backend::Sqlite(s) => s.take(&buckets),
            Backend::Postgres(p) => {
                match tokio::time::timeout(self.timeout, p.take(&buckets)).await {
                    Ok(r) => r,
                    Err(_) => Err(format!(
                        "the store did not answer within rate_limits.store_timeout_ms ({} ms)",
                        self.timeout.as_millis()
                    )),
                }
            }
        };
        match taken {
            Ok(None) => Ok(()),
            Ok(Some((i, wait))) => {
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

/// Rounding slack of the decision, in seconds: a call exactly on its schedule is admitted.
const EPSILON: f64 = 1e-9;

/// The GCRA decision over buckets whose stored arrival times are `tats` (0 for a new bucket), at
/// `now` (seconds): `Ok(new tats)` when every bucket admits the call, else the index of the
/// bucket that makes the caller wait longest and that wait. The PostgreSQL function
/// `bulkhead_rate_take` is the same decision in SQL.
fn decide(buckets: &[Bucket], tats: &[f64], now: f64) -> Result<Vec<f64>, (usize, f64)> {
    let mut next = Vec::with_capacity(buckets.len());
    let mut worst: Option<(usize, f64)> = None;
    for (i, (b, tat)) in buckets.iter().zip(tats).enumerate() {
        let t = tat.max(now);
        let ahead = t - now - b.rate.tolerance_secs();
        if ahead > EPSILON && worst.is_none_or(|(_, w)| ahead > w) {
            worst = Some((i, ahead));
        }
        next.push(t + b.rate.interval_secs());
    }
    match worst {
        Some(w) => Err(w),
        None => Ok(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_burst_then_the_sustained_rate() {
        let b = [bucket(10, 1, Some(3))];
        let mut tat = 0.0;
        let now = 1000.0;
        for _ in 0..3 {
            tat = decide(&b, &[tat], now).unwrap()[0];
        }
        let (i, wait) = decide(&b, &[tat], now).unwrap_err();
        assert_eq!(i, 0);
        assert!((wait - 0.1).abs() < 1e-9, "{wait}");
        assert!(decide(&b, &[tat], now + 0.1).is_ok());
    }

    #[test]
    fn all_or_none_and_the_longest_wait_is_named() {
        let b = [bucket(1, 10, None), bucket(100, 1, None)];
        let next = decide(&b, &[0.0, 0.0], 50.0).unwrap();
        let (i, wait) = decide(&b, &next, 50.0).unwrap_err();
        assert_eq!(i, 0);
        assert!((wait - 10.0).abs() < 1e-9);
    }
}
