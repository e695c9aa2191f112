//! Where chain heads are anchored: the state store (the SQLite store's shared file, or the
//! PostgreSQL store's `bulkhead_audit_heads`), which a head never moves back in (triggers).

use super::chain::Head;
use std::path::Path;
use std::time::Duration;

/// Records a writer's head (after the records it covers are durable).
pub trait Anchor: Send + 'static {
    /// Upserts the head of `head.writer`.
    fn anchor(&mut self, head: &Head) -> Result<(), String>;
}

/// Heads in the SQLite store's shared file.
pub struct SqliteHeads {
    conn: rusqlite::Connection,
}

const UPSERT_SQLITE: &str = "INSERT INTO audit_heads (writer, server, seq, hash, closed, sig, at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
    ON CONFLICT (writer) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
        closed = excluded.closed, sig = excluded.sig, at = excluded.at";

impl SqliteHeads {
    /// Opens the shared file beside the store database `db`.
    pub fn open(db: &Path) -> Result<SqliteHeads, String> {
        let conn = crate::state::shared::open_sqlite(db, Duration::from_secs(5))
            .map_err(|e| format!("{}: {e}", crate::state::shared::sqlite_path(db).display()))?;
        Ok(SqliteHeads { conn })
    }
}

impl Anchor for SqliteHeads {
    fn anchor(&mut self, h: &Head) -> Result<(), String> {
        self.conn
            .prepare_cached(UPSERT_SQLITE)
            .and_then(|mut s| {
                s.execute(rusqlite::params![
                    h.writer,
                    h.server,
                    h.seq,
                    h.hash,
                    h.closed,
                    h.sig,
                    crate::clock::now_rfc3339()
                ])
            })
            .map(|_| ())
            .map_err(|e| format!("audit chain head: {e}"))
    }
}

/// Heads in PostgreSQL, on a connection of the audit writer thread.
pub struct PgHeads {
    link: super::postgres::PgLink,
}

const UPSERT_PG: &str = "INSERT INTO bulkhead_audit_heads (writer, server, seq, hash, closed, sig)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (writer) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
        closed = excluded.closed, sig = excluded.sig, at = now()";

impl PgHeads {
    /// Heads in the database at `url` (connects on first use).
    pub fn new(url: &str, connect_timeout: Duration) -> Result<PgHeads, String> {
        Ok(PgHeads {
            link: super::postgres::PgLink::new(url, "bulkhead-audit-heads", connect_timeout)?,
        })
    }
}

impl Anchor for PgHeads {
    fn anchor(&mut self, h: &Head) -> Result<(), String> {
        self.link
            .connect()
            .map_err(|e| format!("postgres audit heads: {e}"))?;
        let (rt, client) = self.link.parts();
        let r = rt.block_on(client.execute(
            UPSERT_PG,
            &[&h.writer, &h.server, &h.seq, &h.hash, &h.closed, &h.sig],
        ));
        r.map(|_| ()).map_err(|e| {
            self.link.reset();
            format!("postgres audit heads: {e}")
        })
    }
}
