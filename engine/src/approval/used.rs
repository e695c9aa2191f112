//! Single use of an approval, an authorization code or a refresh token across every instance and
//! replica of a trust domain (and the revoked refresh-token families): its id is
//! inserted into the state store once; a second insert (a replay, a second replica racing on the
//! same answer) finds it and is refused. SQLite: the store's shared file; PostgreSQL: a table of
//! the store's database. Expired ids are pruned as visits go, and whether an id has expired is
//! decided by **the store's clock**, never a replica's: a replica whose clock runs ahead would
//! otherwise prune an id that another replica, whose clock is behind, still accepts (a replay).
//! An id the store's clock says has expired is refused as if used.

use crate::state::StateStore;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where consumed approval ids are kept.
pub enum UsedIds {
    /// The SQLite store's shared file (visited on a blocking thread: its lock may wait).
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
    /// The PostgreSQL store's database.
    Postgres {
        /// The store's pool.
        pool: deadpool_postgres::Pool,
        /// The trust domain's scope.
        scope: String,
    },
}

impl UsedIds {
    /// The ids of `store`'s trust domain.
    pub fn open(store: &StateStore) -> Result<UsedIds, String> {
        Ok(match store {
            StateStore::Sqlite(s) => UsedIds::Sqlite(Arc::new(Mutex::new(
                crate::state::shared::open_sqlite(s.path(), Duration::from_secs(5))
                    .map_err(|e| format!("approvals: {e}"))?,
            ))),
            StateStore::Postgres(p) => UsedIds::Postgres {
                pool: p.pool().clone(),
                scope: p.scope().to_owned(),
            },
        })
    }

    /// Marks `id` used; `Ok(false)` when it already was, or the store's clock says `exp` passed. `exp` (seconds since the epoch) is
    /// when it may be forgotten.
    pub async fn consume(&self, id: &str, exp: u64) -> Result<bool, String> {
        match self {
            UsedIds::Sqlite(conn) => {
                let (conn, id) = (conn.clone(), id.to_owned());
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    conn.execute(
                        "DELETE FROM approvals_used WHERE exp < CAST(strftime('%s', 'now') AS INTEGER)",
                        [],
                    )
                    .map_err(|e| e.to_string())?;
                    let n = conn
                        .execute(
                            "INSERT INTO approvals_used (id, exp) SELECT ?1, ?2
                                WHERE ?2 >= CAST(strftime('%s', 'now') AS INTEGER)
                                ON CONFLICT (id) DO NOTHING",
                            rusqlite::params![id, exp as i64],
                        )
                        .map_err(|e| e.to_string())?;
                    Ok(n == 1)
                })
                .await
                .map_err(|e| e.to_string())?
            }
            UsedIds::Postgres { pool, scope } => {
                let conn = pool.get().await.map_err(|e| e.to_string())?;
                conn.execute(
                    "DELETE FROM bulkhead_approvals_used
                        WHERE scope = $1 AND exp < extract(epoch FROM now())::bigint",
                    &[scope],
                )
                .await
                .map_err(|e| e.to_string())?;
                let n = conn
                    .execute(
                        "INSERT INTO bulkhead_approvals_used (scope, id, exp) SELECT $1, $2, $3
                            WHERE $3 >= extract(epoch FROM now())::bigint ON CONFLICT DO NOTHING",
                        &[scope, &id, &(exp as i64)],
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(n == 1)
            }
        }
    }

    /// Whether `id` is recorded and, by the store's clock, not yet expired.
    pub async fn seen(&self, id: &str) -> Result<bool, String> {
        match self {
            UsedIds::Sqlite(conn) => {
                let (conn, id) = (conn.clone(), id.to_owned());
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    conn.query_row(
                        "SELECT count(*) FROM approvals_used
                            WHERE id = ?1 AND exp >= CAST(strftime('%s', 'now') AS INTEGER)",
                        [&id],
                        |row| row.get::<_, i64>(0),
                    )
                    .map(|n| n > 0)
                    .map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| e.to_string())?
            }
            UsedIds::Postgres { pool, scope } => {
                let conn = pool.get().await.map_err(|e| e.to_string())?;
                let row = conn
                    .query_one(
                        "SELECT count(*) FROM bulkhead_approvals_used
                            WHERE scope = $1 AND id = $2 AND exp >= extract(epoch FROM now())::bigint",
                        &[scope, &id],
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(row.get::<_, i64>(0) > 0)
            }
        }
    }
}
