//! Rate buckets in the PostgreSQL store: one call of `bulkhead_rate_take` (schema.sql) per call,
//! on a pooled connection — the one extra round trip — deciding by the database's clock.

use super::Bucket;
use deadpool_postgres::Pool;

/// The buckets of a trust domain in PostgreSQL.
pub(super) struct PgBuckets {
    pool: Pool,
    scope: String,
}

const TAKE: &str = "SELECT wait, refused FROM bulkhead_rate_take($1, $2, $3, $4)";

impl PgBuckets {
    pub(super) fn new(pool: Pool, scope: String) -> PgBuckets {
        PgBuckets { pool, scope }
    }

    /// Counts a call: `None` when it may run, else the refusing bucket's index and the wait.
    pub(super) async fn take(&self, buckets: &[Bucket]) -> Result<Option<(usize, f64)>, String> {
        let conn = self.pool.get().await.map_err(|e| e.to_string())?;
        let stmt = conn.prepare_cached(TAKE).await.map_err(|e| e.to_string())?;
        let keys: Vec<&str> = buckets.iter().map(|b| b.key.as_str()).collect();
        let interval: Vec<f64> = buckets.iter().map(|b| b.rate.interval_secs()).collect();
        let tolerance: Vec<f64> = buckets.iter().map(|b| b.rate.tolerance_secs()).collect();
        let row = conn
            .query_one(&stmt, &[&self.scope, &keys, &interval, &tolerance])
            .await
            .map_err(|e| e.to_string())?;
        let (wait, refused): (f64, i32) = (row.get(0), row.get(1));
        Ok((refused > 0).then(|| ((refused - 1) as usize, wait)))
    }
}
