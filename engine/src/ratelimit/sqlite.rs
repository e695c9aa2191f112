//! Rate buckets in the SQLite store's shared file: one `BEGIN IMMEDIATE` transaction per visit
//! reads the buckets, decides ([`super::decide`]) and writes them. SQLite's write lock serialises
//! the instances of the host; its busy wait is the store timeout.

use super::{Counted, Visit, decide};
use rusqlite::{Connection, TransactionBehavior, params};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// The buckets of one process.
pub(super) struct SqliteBuckets {
    conn: Mutex<Connection>,
    visits: std::sync::atomic::AtomicU32,
    /// The store timeout: the longest a visit waits, for the connection as for the file lock.
    timeout: Duration,
}

impl SqliteBuckets {
    /// Opens the shared file beside the store's database `db`.
    pub(super) fn open(db: &Path, timeout: Duration) -> Result<SqliteBuckets, String> {
        let conn = crate::state::shared::open_sqlite(db, timeout)
            .map_err(|e| format!("{}: {e}", crate::state::shared::sqlite_path(db).display()))?;
        Ok(SqliteBuckets {
            conn: Mutex::new(conn),
            visits: std::sync::atomic::AtomicU32::new(0),
            timeout,
        })
    }

    /// The process's connection, waited for at most the store timeout.
    ///
    /// Invariant: a visit answers within about twice the store timeout (this wait, then
    /// SQLite's busy wait). A plain `lock()` let a call starve behind the background counter,
    /// which takes the connection again and again while another process holds the file: the
    /// call then never answered instead of being refused.
    fn connection(&self) -> Result<std::sync::MutexGuard<'_, Connection>, String> {
        let deadline = std::time::Instant::now() + self.timeout;
        loop {
            match self.conn.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(std::sync::TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(format!(
                            "the store did not answer within rate_limits.store_timeout_ms ({} ms)",
                            self.timeout.as_millis()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    /// One visit (see [`Visit`]); arrival times on this host's clock.
    pub(super) fn take(&self, v: &Visit<'_>) -> Result<Counted, String> {
        let now = super::now_secs();
        let prune = self
            .visits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            % 1024
            == 1023;
        let mut conn = self.connection()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        let mut tats = Vec::with_capacity(v.buckets.len());
        {
            let mut read = tx
                .prepare_cached("SELECT tat FROM rate WHERE key = ?1")
                .map_err(|e| e.to_string())?;
            for b in v.buckets {
                let tat: f64 = match read.query_row(params![b.key], |r| r.get(0)) {
                    Ok(t) => t,
                    Err(rusqlite::Error::QueryReturnedNoRows) => 0.0,
                    Err(e) => return Err(e.to_string()),
                };
                tats.push(tat);
            }
        }
        let counted = decide(v, &tats, now);
        {
            let mut write = tx
                .prepare_cached(
                    "INSERT INTO rate (key, tat) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET tat = excluded.tat",
                )
                .map_err(|e| e.to_string())?;
            for ((b, tat), old) in v.buckets.iter().zip(&counted.tats).zip(&tats) {
                if tat != old {
                    write
                        .execute(params![b.key, tat])
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        if prune {
            // Buckets past their arrival time are the same as absent ones.
            tx.execute(
                "DELETE FROM rate WHERE key IN (SELECT key FROM rate WHERE tat < ?1 LIMIT 1000)",
                params![now],
            )
            .map_err(|e| e.to_string())?;
        }
        tx.commit().map_err(|e| e.to_string())?;
        Ok(counted)
    }
}
