//! The SQLite database of a store: schema, creation, opening, and the checks that it is the
//! store it claims to be. The database refuses any lowering or deletion by trigger.

use crate::state::{StateError, StateErrorKind, new_store_id};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

/// The schema version stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 2;
/// `PRAGMA application_id` marking a Bulkhead compliance store (`"BHcs"`).
const APPLICATION_ID: i64 = 0x4248_6373;
/// How long a writer waits for another process's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA_V1: &str = "
CREATE TABLE sessions (
    user TEXT NOT NULL, session TEXT NOT NULL,
    level INTEGER NOT NULL CHECK (level BETWEEN 0 AND 3),
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user, session)
) WITHOUT ROWID;
CREATE TABLE datasets (
    user TEXT NOT NULL, session TEXT NOT NULL, name TEXT NOT NULL,
    level INTEGER NOT NULL CHECK (level BETWEEN 0 AND 3),
    first_seen TEXT NOT NULL,
    PRIMARY KEY (user, session, name)
) WITHOUT ROWID;
CREATE TRIGGER sessions_never_lower BEFORE UPDATE OF level ON sessions
    WHEN NEW.level < OLD.level BEGIN SELECT RAISE(ABORT, 'sensitivity never lowers'); END;
CREATE TRIGGER sessions_never_delete BEFORE DELETE ON sessions
    BEGIN SELECT RAISE(ABORT, 'sensitivity records are never deleted'); END;
CREATE TRIGGER datasets_never_lower BEFORE UPDATE OF level ON datasets
    WHEN NEW.level < OLD.level BEGIN SELECT RAISE(ABORT, 'sensitivity never lowers'); END;
CREATE TRIGGER datasets_never_delete BEFORE DELETE ON datasets
    BEGIN SELECT RAISE(ABORT, 'sensitivity records are never deleted'); END;
";

/// Version 2: the store's identity and a generation counter bumped by every escalation.
const SCHEMA_V2: &str = "
CREATE TABLE meta (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    store_id TEXT NOT NULL,
    generation INTEGER NOT NULL CHECK (generation >= 0),
    created_at TEXT NOT NULL
);
CREATE TRIGGER meta_never_lower BEFORE UPDATE ON meta
    WHEN NEW.generation < OLD.generation OR NEW.store_id <> OLD.store_id
    BEGIN SELECT RAISE(ABORT, 'store identity and generation never go back'); END;
CREATE TRIGGER meta_never_delete BEFORE DELETE ON meta
    BEGIN SELECT RAISE(ABORT, 'store identity is never deleted'); END;
";

pub const SELECT_LEVEL: &str = "SELECT level FROM sessions WHERE user = ?1 AND session = ?2";
pub const SELECT_LEVEL_AND_GENERATION: &str = "SELECT
    (SELECT level FROM sessions WHERE user = ?1 AND session = ?2),
    (SELECT generation FROM meta WHERE one = 1)";
pub const SELECT_DATASETS: &str =
    "SELECT name, level FROM datasets WHERE user = ?1 AND session = ?2 ORDER BY name";
pub const UPSERT_SESSION: &str = "INSERT INTO sessions (user, session, level, updated_at)
    VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (user, session) DO UPDATE SET
        updated_at = CASE WHEN excluded.level > level THEN excluded.updated_at ELSE updated_at END,
        level = max(level, excluded.level)";
pub const UPSERT_DATASET: &str = "INSERT INTO datasets (user, session, name, level, first_seen)
    VALUES (?1, ?2, ?3, ?4, ?5)
    ON CONFLICT (user, session, name) DO UPDATE SET level = max(level, excluded.level)";
pub const BUMP_GENERATION: &str =
    "UPDATE meta SET generation = generation + 1 WHERE one = 1 RETURNING generation";

/// Classifies a SQLite error: damaged files are `Corrupt`, a moved file `Tampered`, the rest
/// `Unavailable`.
pub fn map_sql_error(path: &Path, e: rusqlite::Error) -> StateError {
    let kind = match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => StateErrorKind::Corrupt,
            // SQLITE_READONLY_DBMOVED: the file was unlinked or renamed while open.
            ErrorCode::ReadOnly if f.extended_code == 1032 => StateErrorKind::Tampered,
            _ => StateErrorKind::Unavailable,
        },
        _ => StateErrorKind::Unavailable,
    };
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => f.extended_code,
        _ => 0,
    };
    StateError::io(kind, path, format!("{e} (code {code})"))
}

/// Opens an existing store read-write and checks it: application id, schema (migrating version 1),
/// `quick_check`. Returns the connection and the store id.
pub fn open(path: &Path) -> Result<(Connection, String), StateError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!("{}: not a regular file", path.display()),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StateError::io(StateErrorKind::Missing, path, e));
        }
        Err(e) => return Err(StateError::io(StateErrorKind::Unavailable, path, e)),
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    // A store is never empty (it is built aside and linked into place): SQLite would take an
    // empty file for a new database and write to it.
    if std::fs::symlink_metadata(path)
        .map(|m| m.len())
        .unwrap_or(0)
        == 0
    {
        return Err(StateError::new(
            StateErrorKind::Corrupt,
            format!("{}: empty file", path.display()),
        ));
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| map_sql_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| map_sql_error(path, e))?;
    // Identify the file before changing anything in it.
    let read = |pragma: &str| -> Result<i64, StateError> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .map_err(|e| map_sql_error(path, e))
    };
    let (app, version) = (read("application_id")?, read("user_version")?);
    if app != APPLICATION_ID || !(1..=SCHEMA_VERSION).contains(&version) {
        return Err(StateError::new(
            StateErrorKind::Schema,
            format!(
                "{}: application_id {app:#x} version {version}, expected {APPLICATION_ID:#x} version {SCHEMA_VERSION}",
                path.display()
            ),
        ));
    }
    configure(&conn).map_err(|e| map_sql_error(path, e))?;
    if version == 1 {
        migrate_v1(&conn).map_err(|e| map_sql_error(path, e))?;
    }
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| map_sql_error(path, e))?;
    if check != "ok" {
        return Err(StateError::new(
            StateErrorKind::Corrupt,
            format!("{}: quick_check: {check}", path.display()),
        ));
    }
    let id: String = conn
        .query_row("SELECT store_id FROM meta WHERE one = 1", [], |r| r.get(0))
        .map_err(|e| map_sql_error(path, e))?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok((conn, id))
}

/// A second connection to an already checked store, for reads.
pub fn open_reader(path: &Path) -> Result<Connection, StateError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| map_sql_error(path, e))?;
    configure(&conn).map_err(|e| map_sql_error(path, e))?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::InvalidQuery);
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "trusted_schema", "OFF")?;
    Ok(())
}

fn migrate_v1(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let r = (|| {
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if v == 1 {
            conn.execute_batch(SCHEMA_V2)?;
            conn.execute(
                "INSERT INTO meta (one, store_id, generation, created_at) VALUES (1, ?1, 0, ?2)",
                rusqlite::params![new_store_id(), crate::clock::now_rfc3339()],
            )?;
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        conn.execute_batch("COMMIT")
    })();
    if r.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    r
}

/// Builds a fresh store under a temporary name and links it into place unless another process
/// won; the path never names an empty or half-initialised database.
pub fn create(path: &Path) -> Result<(), StateError> {
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let tmp = path.with_file_name(format!(
        ".{name}.init-{}-{}",
        std::process::id(),
        new_store_id()
    ));
    let result = (|| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &tmp, e))?;
        let conn = Connection::open_with_flags(&tmp, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(|e| map_sql_error(&tmp, e))?;
        let init = (|| {
            configure(&conn)?;
            conn.execute_batch(SCHEMA_V1)?;
            conn.execute_batch(SCHEMA_V2)?;
            conn.execute(
                "INSERT INTO meta (one, store_id, generation, created_at) VALUES (1, ?1, 0, ?2)",
                rusqlite::params![new_store_id(), crate::clock::now_rfc3339()],
            )?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)?;
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
        })();
        init.map_err(|e| map_sql_error(&tmp, e))?;
        conn.close().map_err(|(_, e)| map_sql_error(&tmp, e))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(StateError::io(StateErrorKind::Unavailable, path, e)),
        }
    })();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = tmp.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    result
}
