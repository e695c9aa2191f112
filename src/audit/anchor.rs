//! Where chain heads are anchored: the state store (the SQLite store's shared file, or the
//! PostgreSQL store's `bulkhead_audit_heads`), which a head never moves back in (triggers).

use super::chain::Head;
use std::path::Path;
use std::str::FromStr;
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

/// Heads in PostgreSQL, on the audit writer's own connection.
pub struct PgHeads {
    rt: tokio::runtime::Runtime,
    config: tokio_postgres::Config,
    client: Option<tokio_postgres::Client>,
}

const UPSERT_PG: &str = "INSERT INTO bulkhead_audit_heads (writer, server, seq, hash, closed, sig)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (writer) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
        closed = excluded.closed, sig = excluded.sig, at = now()";

impl PgHeads {
    /// Heads in the database at `url` (connects on first use).
    pub fn new(url: &str, connect_timeout: Duration) -> Result<PgHeads, String> {
        let mut config =
            tokio_postgres::Config::from_str(url).map_err(|e| format!("postgres url: {e}"))?;
        config
            .application_name("bulkhead-audit-heads")
            .connect_timeout(connect_timeout);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(PgHeads {
            rt,
            config,
            client: None,
        })
    }
}

impl Anchor for PgHeads {
    fn anchor(&mut self, h: &Head) -> Result<(), String> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            let (client, conn) = self
                .rt
                .block_on(self.config.connect(tokio_postgres::NoTls))
                .map_err(|e| format!("postgres audit heads: {e}"))?;
            self.rt.spawn(async move {
                let _ = conn.await;
            });
            self.client = Some(client);
        }
        let client = self.client.as_ref().expect("connected");
        let r = self.rt.block_on(client.execute(
            UPSERT_PG,
            &[&h.writer, &h.server, &h.seq, &h.hash, &h.closed, &h.sig],
        ));
        if let Err(e) = r {
            self.client = None;
            return Err(format!("postgres audit heads: {e}"));
        }
        Ok(())
    }
}
