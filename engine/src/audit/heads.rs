//! Where checkpoints are kept: the SQLite store's shared file (`audit_checkpoints`) or the
//! PostgreSQL store's `bulkhead_audit_checkpoints`. A writer commits the next checkpoint in one
//! transaction with reading the newest (SQLite `BEGIN IMMEDIATE`, a PostgreSQL advisory lock),
//! so every writer of the store extends one chain; the oldest beyond `audit.checkpoints_kept`
//! are deleted in the same transaction. Triggers refuse an update, an insert that is not the
//! next number, and deleting the newest (for mistakes: an attacker with the store can drop them,
//! which is what the signature and the anchor are for).

use super::checkpoint::{Checkpoint, Stored};
use ed25519_dalek::SigningKey;
use std::path::Path;
use std::time::Duration;

/// Makes the next checkpoint from the newest (None: there is none yet).
pub type Make<'a> = dyn FnMut(Option<&Stored>) -> Result<Checkpoint, String> + 'a;

/// A store of checkpoints.
pub trait Heads: Send + 'static {
    /// In one transaction: reads the newest checkpoint, makes the next with `make`, signs it with
    /// `key` and appends it, and deletes those older than the kept number.
    fn commit(&mut self, make: &mut Make<'_>, key: Option<&SigningKey>) -> Result<Stored, String>;
}

/// Checkpoints in the SQLite store's shared file.
pub struct SqliteHeads {
    conn: rusqlite::Connection,
    kept: u64,
}

impl SqliteHeads {
    /// Opens the shared file beside the store database `db`, keeping `kept` checkpoints.
    pub fn open(db: &Path, kept: u64) -> Result<SqliteHeads, String> {
        let conn = crate::state::shared::open_sqlite(db, Duration::from_secs(5))
            .map_err(|e| format!("{}: {e}", crate::state::shared::sqlite_path(db).display()))?;
        Ok(SqliteHeads {
            conn,
            kept: kept.max(1),
        })
    }
}

impl Heads for SqliteHeads {
    fn commit(&mut self, make: &mut Make<'_>, key: Option<&SigningKey>) -> Result<Stored, String> {
        let fail = |e: rusqlite::Error| format!("audit checkpoints: {e}");
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(fail)?;
        let newest = {
            let mut stmt = tx
                .prepare_cached("SELECT body, sig FROM audit_checkpoints ORDER BY n DESC LIMIT 1")
                .map_err(fail)?;
            let mut rows = stmt.query([]).map_err(fail)?;
            match rows.next().map_err(fail)? {
                Some(r) => Some(Stored::parse(
                    r.get(0).map_err(fail)?,
                    r.get(1).map_err(fail)?,
                )?),
                None => None,
            }
        };
        let stored = Stored::seal(make(newest.as_ref())?, key);
        let n = stored.checkpoint.n as i64;
        tx.prepare_cached(
            "INSERT INTO audit_checkpoints (n, hash, body, sig, at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(rusqlite::params![
                n,
                stored.hash(),
                stored.body,
                stored.sig,
                crate::clock::now_rfc3339()
            ])
        })
        .map_err(fail)?;
        tx.prepare_cached("DELETE FROM audit_checkpoints WHERE n <= ?1")
            .and_then(|mut s| s.execute([n - self.kept as i64]))
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(stored)
    }
}

/// Checkpoints in PostgreSQL, on a connection of the audit writer thread.
pub struct PgHeads {
    link: super::postgres::PgLink,
    kept: u64,
}

impl PgHeads {
    /// Checkpoints in the store `pg` (connects on first use), keeping `kept`.
    pub fn new(pg: &crate::state::postgres::PgOptions, kept: u64) -> Result<PgHeads, String> {
        Ok(PgHeads {
            link: super::postgres::PgLink::new(pg, "bulkhead-audit-heads")?,
            kept: kept.max(1),
        })
    }
}

/// The advisory lock every committer of a PostgreSQL store takes (`bulkhead_audit_checkpoints`).
const PG_LOCK: i64 = 0x6275_6c6b_6175_6431;

impl Heads for PgHeads {
    fn commit(&mut self, make: &mut Make<'_>, key: Option<&SigningKey>) -> Result<Stored, String> {
        self.link
            .connect()
            .map_err(|e| format!("postgres audit checkpoints: {e}"))?;
        let kept = self.kept as i64;
        let (rt, client) = self.link.parts();
        let result: Result<Stored, String> = rt.block_on(async {
            let pg = |e: tokio_postgres::Error| e.to_string();
            client.batch_execute("BEGIN").await.map_err(pg)?;
            client
                .execute("SELECT pg_advisory_xact_lock($1)", &[&PG_LOCK])
                .await
                .map_err(pg)?;
            let newest = client
                .query_opt(
                    "SELECT body, sig FROM bulkhead_audit_checkpoints ORDER BY n DESC LIMIT 1",
                    &[],
                )
                .await
                .map_err(pg)?
                .map(|r| Stored::parse(r.get(0), r.get(1)))
                .transpose()?;
            let stored = Stored::seal(make(newest.as_ref())?, key);
            let n = stored.checkpoint.n as i64;
            client
                .execute(
                    "INSERT INTO bulkhead_audit_checkpoints (n, hash, body, sig) VALUES ($1, $2, $3, $4)",
                    &[&n, &stored.hash(), &stored.body, &stored.sig],
                )
                .await
                .map_err(pg)?;
            client
                .execute(
                    "DELETE FROM bulkhead_audit_checkpoints WHERE n <= $1",
                    &[&(n - kept)],
                )
                .await
                .map_err(pg)?;
            client.batch_execute("COMMIT").await.map_err(pg)?;
            Ok(stored)
        });
        result.map_err(|e| {
            // The connection may be inside a failed transaction: start over on the next use.
            self.link.reset();
            format!("postgres audit checkpoints: {e}")
        })
    }
}

/// Every kept checkpoint of a SQLite store's shared file, oldest first (none: no file).
pub fn read_sqlite(db: &Path) -> Result<Vec<Stored>, String> {
    let fail = |e: rusqlite::Error| format!("audit checkpoints: {e}");
    let Some(conn) = crate::state::shared::open_sqlite_read(db).map_err(fail)? else {
        return Ok(Vec::new());
    };
    let mut stmt = match conn.prepare("SELECT body, sig FROM audit_checkpoints ORDER BY n") {
        Ok(s) => s,
        Err(e) if e.to_string().contains("no such table") => return Ok(Vec::new()),
        Err(e) => return Err(fail(e)),
    };
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .map_err(fail)?;
    let mut out = Vec::new();
    for r in rows {
        let (body, sig) = r.map_err(fail)?;
        out.push(Stored::parse(body, sig)?);
    }
    Ok(out)
}

/// Every kept checkpoint of a PostgreSQL store, oldest first.
pub async fn read_pg(client: &tokio_postgres::Client) -> Result<Vec<Stored>, String> {
    let rows = client
        .query(
            "SELECT body, sig FROM bulkhead_audit_checkpoints ORDER BY n",
            &[],
        )
        .await
        .map_err(|e| format!("audit checkpoints: {e}"))?;
    rows.iter()
        .map(|r| Stored::parse(r.get(0), r.get(1)))
        .collect()
}
