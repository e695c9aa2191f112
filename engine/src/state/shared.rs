//! What every instance of a trust domain shares besides the ratchet: rate-limit buckets, the
//! audit chains' anchored heads and the ids of approvals already used. On SQLite they live in `shared-<store file>` beside the store's
//! database (so they never slow or lock the ratchet's writes, and losing them loses no
//! compliance record); on PostgreSQL, in tables of the store's database (`schema.sql`).
//!
//! Neither is a compliance record: a deleted file only resets rate buckets, and makes `bulkhead
//! audit verify` report every writer as unknown (the evidence that something was removed).

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rate (
    key TEXT PRIMARY KEY,
    tat REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit_checkpoints (
    n INTEGER PRIMARY KEY,
    hash TEXT NOT NULL,
    body TEXT NOT NULL,
    sig TEXT,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS approvals_used (
    id TEXT PRIMARY KEY,
    exp INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS audit_checkpoints_next BEFORE INSERT ON audit_checkpoints
    WHEN NEW.n <> coalesce((SELECT max(n) FROM audit_checkpoints) + 1, NEW.n)
    BEGIN SELECT RAISE(ABORT, 'an audit checkpoint follows the newest one'); END;
CREATE TRIGGER IF NOT EXISTS audit_checkpoints_fixed BEFORE UPDATE ON audit_checkpoints
    BEGIN SELECT RAISE(ABORT, 'an audit checkpoint never changes'); END;
CREATE TRIGGER IF NOT EXISTS audit_checkpoints_newest_kept BEFORE DELETE ON audit_checkpoints
    WHEN OLD.n >= (SELECT max(n) FROM audit_checkpoints)
    BEGIN SELECT RAISE(ABORT, 'the newest audit checkpoint is never deleted'); END;
";

/// The shared file beside the SQLite store database `db`.
pub fn sqlite_path(db: &Path) -> PathBuf {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store.db".into());
    db.with_file_name(format!("shared-{name}"))
}

/// How long opening waits for other processes setting the same file up (every instance of a
/// deployment starts at once).
const SETUP_WAIT: Duration = Duration::from_secs(15);

/// Opens (creating, 0600) the shared file beside `db`: WAL, `synchronous=NORMAL` (a power loss
/// may lose the last rate counts, never a compliance record), busy wait `timeout` afterwards.
/// Instances starting together race to switch the journal mode and create the tables, which
/// SQLite may answer with "database is locked" without waiting: the set-up is retried, bounded.
pub fn open_sqlite(db: &Path, timeout: Duration) -> rusqlite::Result<Connection> {
    let path = sqlite_path(db);
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
        | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
        | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(&path, flags)?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    }
    conn.busy_timeout(timeout.max(Duration::from_secs(1)))?;
    let deadline = std::time::Instant::now() + SETUP_WAIT;
    loop {
        match set_up(&conn) {
            Ok(()) => break,
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
    conn.busy_timeout(timeout)?;
    Ok(conn)
}

fn set_up(conn: &Connection) -> rusqlite::Result<()> {
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA} COMMIT;"))
        .inspect_err(|_| {
            let _ = conn.execute_batch("ROLLBACK");
        })
}

/// Opens the shared file read-only, for `bulkhead audit verify` (None: there is none).
pub fn open_sqlite_read(db: &Path) -> rusqlite::Result<Option<Connection>> {
    let path = sqlite_path(db);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
        | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    Connection::open_with_flags(&path, flags).map(Some)
}
