//! Kept passes on PostgreSQL: one connection per process (the *keeper connection*, outside the
//! pool) holds the shared advisory locks of every kept pass, so keeping a pass costs no pooled
//! connection and a joined call no round trip. Locks are taken there only with
//! `pg_try_advisory_lock_shared` (`bulkhead_keep`), so the connection never waits; a lock not
//! granted means an escalation holds it or waits for it, and the call waits in line on a pooled
//! connection as without kept passes.
//!
//! When the keeper connection ends, PostgreSQL ends its locks: the connection's task marks it
//! dead, and no call joins a pass kept on it from then on ([`crate::state::Hold::is_live`]).
//! Calls already joined finish, as a call whose pooled connection dies does.

use super::db_error;
use crate::state::StateError;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio_postgres::Statement;

/// The keeper connection.
pub(crate) struct KeeperConn {
    client: tokio_postgres::Client,
    alive: Arc<AtomicBool>,
    keep: Statement,
    unlock: Statement,
    waiting: Statement,
}

/// A shared lock held on the keeper connection. Dropping it unlocks in the background; an
/// unlock that fails or finds no lock retires the connection (nothing joins its passes again).
pub struct PgKeptHold {
    conn: Arc<KeeperConn>,
    key: i64,
}

impl Drop for PgKeptHold {
    fn drop(&mut self) {
        let (conn, key) = (self.conn.clone(), self.key);
        if !conn.alive.load(Ordering::Acquire) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move {
                    let ok = conn
                        .client
                        .query_one(&conn.unlock, &[&key])
                        .await
                        .map(|r| r.get::<_, bool>(0))
                        .unwrap_or(false);
                    if !ok {
                        conn.alive.store(false, Ordering::Release);
                    }
                });
            }
            // No runtime to send the unlock on: retire the connection, whose task ends with its
            // runtime (and PostgreSQL then ends its locks).
            Err(_) => conn.alive.store(false, Ordering::Release),
        }
    }
}

impl PgKeptHold {
    pub(crate) fn key(&self) -> i64 {
        self.key
    }

    pub(crate) fn is_live(&self) -> bool {
        self.conn.alive.load(Ordering::Acquire)
    }

    pub(crate) fn conn(&self) -> Arc<KeeperConn> {
        self.conn.clone()
    }
}

impl KeeperConn {
    /// Connects (bounded by the config's connect timeout) and prepares the three statements.
    pub(crate) async fn connect(
        target: &crate::pg_tls::PgTarget,
    ) -> Result<Arc<KeeperConn>, StateError> {
        let (client, connection) = target.connect().await.map_err(db_error)?;
        let alive = Arc::new(AtomicBool::new(true));
        let flag = alive.clone();
        tokio::spawn(async move {
            let _ = connection.await;
            flag.store(false, Ordering::Release);
        });
        let prepare = async |sql: &str| client.prepare(sql).await.map_err(db_error);
        let keep =
            prepare("SELECT granted, level, store_id FROM bulkhead_keep($1, $2, $3, $4)").await?;
        let unlock = prepare("SELECT pg_advisory_unlock_shared($1)").await?;
        let waiting = prepare(
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks WHERE locktype = 'advisory' \
             AND NOT granted AND mode = 'ExclusiveLock' AND objsubid = 1 AND database = \
             (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .await?;
        Ok(Arc::new(KeeperConn {
            client,
            alive,
            keep,
            unlock,
            waiting,
        }))
    }

    pub(crate) fn is_live(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Tries the session's lock shared on this connection: `None` when not granted, else the
    /// hold with the level and store id read under it.
    pub(crate) async fn try_keep(
        self: &Arc<Self>,
        key: i64,
        server: &str,
        user: &str,
        session: &str,
    ) -> Result<Option<(PgKeptHold, i16, Option<String>)>, StateError> {
        let row = match self
            .client
            .query_one(&self.keep, &[&key, &server, &user, &session])
            .await
        {
            Ok(r) => r,
            Err(e) => {
                // The lock may or may not have been taken: retire the connection.
                self.alive.store(false, Ordering::Release);
                return Err(db_error(e));
            }
        };
        if !row.get::<_, bool>(0) {
            return Ok(None);
        }
        let hold = PgKeptHold {
            conn: self.clone(),
            key,
        };
        Ok(Some((hold, row.get(1), row.get(2))))
    }

    /// The keys whose exclusive lock some connection waits for.
    pub(crate) async fn waiting(&self) -> Result<HashSet<i64>, StateError> {
        let rows = self
            .client
            .query(&self.waiting, &[])
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|r| r.get::<_, i64>(0)).collect())
    }
}

/// The process's keeper connection, made on first use and again after it ended (at most once a
/// second after a failed attempt).
#[derive(Default)]
pub(crate) struct KeeperSlot {
    slot: tokio::sync::Mutex<(Option<Arc<KeeperConn>>, Option<Instant>)>,
}

const RETRY_AFTER: Duration = Duration::from_secs(1);

impl KeeperSlot {
    /// The live keeper connection; `None` (keep nothing now) while another call connects or
    /// after a recent failure.
    pub(crate) async fn get(&self, target: &crate::pg_tls::PgTarget) -> Option<Arc<KeeperConn>> {
        let mut slot = self.slot.try_lock().ok()?;
        if let Some(c) = slot.0.as_ref().filter(|c| c.is_live()) {
            return Some(c.clone());
        }
        if slot.1.is_some_and(|t| t.elapsed() < RETRY_AFTER) {
            return None;
        }
        match KeeperConn::connect(target).await {
            Ok(c) => {
                *slot = (Some(c.clone()), None);
                Some(c)
            }
            Err(e) => {
                tracing::warn!(error = %e, "postgres: no keeper connection; calls take their own locks");
                *slot = (None, Some(Instant::now()));
                None
            }
        }
    }
}
