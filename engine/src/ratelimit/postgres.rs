//! Rate buckets in the PostgreSQL store: one call of `bulkhead_rate_take` (schema.sql) per visit,
//! on a pooled connection — the one extra round trip — deciding by the database's clock.

use super::{Counted, Visit};
use crate::pg_tls::PgTarget;
use deadpool_postgres::Pool;

/// The buckets of a trust domain in PostgreSQL.
pub(super) struct PgBuckets {
    pool: Pool,
    /// How the pool's connections are opened (a cancel request opens one more).
    target: PgTarget,
    scope: String,
}

const TAKE: &str =
    "SELECT wait, refused, tats, now_s FROM bulkhead_rate_take($1, $2, $3, $4, $5, $6)";

impl PgBuckets {
    pub(super) fn new(pool: Pool, target: PgTarget, scope: String) -> PgBuckets {
        PgBuckets {
            pool,
            target,
            scope,
        }
    }

    /// One visit (see [`Visit`]); arrival times converted to this host's clock.
    pub(super) async fn take(&self, v: &Visit<'_>) -> Result<Counted, String> {
        let mut guard = Unanswered(
            Some(self.pool.get().await.map_err(|e| e.to_string())?),
            self.target.clone(),
        );
        let conn = guard.0.as_ref().expect("set above");
        let stmt = conn.prepare_cached(TAKE).await.map_err(|e| e.to_string())?;
        let keys: Vec<&str> = v.buckets.iter().map(|b| b.key.as_str()).collect();
        let interval: Vec<f64> = v.buckets.iter().map(|b| b.rate.interval_secs()).collect();
        let tolerance: Vec<f64> = v.buckets.iter().map(|b| b.rate.tolerance_secs()).collect();
        let forced: Vec<i32> = v.forced.iter().map(|&n| n as i32).collect();
        let want = v.want as i32;
        let asked = super::now_secs();
        let row = conn
            .query_one(
                &stmt,
                &[&self.scope, &keys, &interval, &tolerance, &forced, &want],
            )
            .await
            .map_err(|e| e.to_string())?;
        // Answered: the connection may go back to the pool.
        drop(guard.0.take());
        let (wait, refused, tats, db_now): (f64, i32, Vec<f64>, f64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        // The database's clock decides; this host reads it as offset from its own.
        let offset = db_now - asked;
        Ok(Counted {
            refused: (refused > 0).then(|| ((refused - 1) as usize, wait)),
            tats: tats.into_iter().map(|t| t - offset).collect(),
        })
    }
}

/// A pooled connection whose statement has not answered. Dropped so (the caller's timeout gave
/// up on the visit), the statement is cancelled and the connection closed, never returned to the
/// pool: the next user of a connection still waiting on a lock would wait behind it.
struct Unanswered(Option<deadpool_postgres::Object>, PgTarget);

impl Drop for Unanswered {
    fn drop(&mut self) {
        let Some(conn) = self.0.take() else { return };
        let cancel = conn.cancel_token();
        let raw = deadpool_postgres::Object::take(conn);
        let target = self.1.clone();
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            h.spawn(async move {
                let _ = target.cancel(&cancel).await;
                drop(raw);
            });
        }
    }
}
