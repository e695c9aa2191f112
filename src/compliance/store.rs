//! The SQLite-backed ratchet store: one row per (user, session) and per dataset, raised only
//! through `max(level, excluded.level)` upserts inside `BEGIN IMMEDIATE` transactions.

use super::{ComplianceError, now_rfc3339};
use crate::identity::Identity;
use crate::policy::Sensitivity;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::collections::HashMap;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The schema version stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 1;
/// `PRAGMA application_id` marking a Bulkhead compliance store (`"BHcs"`).
const APPLICATION_ID: i64 = 0x4248_6373;
/// Longest accepted dataset name, in bytes.
pub const MAX_DATASET_LEN: usize = 256;
/// How long a writer waits for another process's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
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

const SELECT_LEVEL: &str = "SELECT level FROM sessions WHERE user = ?1 AND session = ?2";
const SELECT_DATASETS: &str =
    "SELECT name, level FROM datasets WHERE user = ?1 AND session = ?2 ORDER BY name";
const UPSERT_SESSION: &str = "INSERT INTO sessions (user, session, level, updated_at)
    VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (user, session) DO UPDATE SET
        updated_at = CASE WHEN excluded.level > level THEN excluded.updated_at ELSE updated_at END,
        level = max(level, excluded.level)";
const UPSERT_DATASET: &str = "INSERT INTO datasets (user, session, name, level, first_seen)
    VALUES (?1, ?2, ?3, ?4, ?5)
    ON CONFLICT (user, session, name) DO UPDATE SET level = max(level, excluded.level)";

/// One dataset that raised a session, at the highest level it was seen with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetRecord {
    /// The dataset's name as given to [`ComplianceStore::escalate`].
    pub name: String,
    /// The highest level it was recorded at.
    pub level: Sensitivity,
}

/// The full state of one (user, session).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SessionRecord {
    /// The session's level: the highest ever recorded, `Public` when there is no record.
    pub level: Sensitivity,
    /// The datasets that raised it, sorted by name.
    pub datasets: Vec<DatasetRecord>,
}

/// The ratchet store shared by every instance (process) of a server. `Send + Sync`; one SQLite
/// connection behind a mutex. There is no API that lowers or deletes anything.
pub struct ComplianceStore {
    path: PathBuf,
    state: Result<Mutex<Connection>, ComplianceError>,
    /// Cross-process escalation counter; `None` means every read goes to the database.
    epoch: Option<super::epoch::Epoch>,
    /// Levels read from the database, keyed by the counter value read just before.
    cache: Mutex<HashMap<Identity, (u64, Sensitivity)>>,
}

/// Most sessions cached per process before the cache is cleared (it only saves reads).
const CACHE_LIMIT: usize = 100_000;

fn epoch_for(path: &Path) -> Option<super::epoch::Epoch> {
    match super::epoch::Epoch::open(&path.with_extension("epoch")) {
        Ok(e) => Some(e),
        Err(err) => {
            tracing::warn!(error = %err, "no escalation counter; every level check reads the store");
            None
        }
    }
}

impl std::fmt::Debug for ComplianceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComplianceStore")
            .field("path", &self.path)
            .field("healthy", &self.state.is_ok())
            .finish()
    }
}

impl ComplianceStore {
    /// Opens the store at `path`, creating it (directory 0700, file 0600) when it does not exist.
    /// An existing file must be a healthy store of this schema version, or this fails.
    pub fn open(path: &Path) -> Result<ComplianceStore, ComplianceError> {
        let conn = connect(path)?;
        Ok(ComplianceStore {
            path: path.to_path_buf(),
            state: Ok(Mutex::new(conn)),
            epoch: epoch_for(path),
            cache: Mutex::default(),
        })
    }

    /// Like [`open`](Self::open), but always returns a store: when opening fails, every call on
    /// the returned store reports that error, so callers fail closed instead of not starting.
    pub fn open_fail_closed(path: &Path) -> (ComplianceStore, Option<ComplianceError>) {
        match connect(path) {
            Ok(conn) => (
                ComplianceStore {
                    path: path.to_path_buf(),
                    state: Ok(Mutex::new(conn)),
                    epoch: epoch_for(path),
                    cache: Mutex::default(),
                },
                None,
            ),
            Err(e) => (
                ComplianceStore {
                    path: path.to_path_buf(),
                    state: Err(e.clone()),
                    epoch: None,
                    cache: Mutex::default(),
                },
                Some(e),
            ),
        }
    }

    /// The database file this store uses.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session's level, `Public` when there is no record. The hot path: served from memory
    /// while no process has escalated any session since it was read (the shared counter says so),
    /// otherwise one cached SELECT.
    pub fn level(&self, id: &Identity) -> Result<Sensitivity, ComplianceError> {
        let Some(epoch) = &self.epoch else {
            return self.level_from_db(id);
        };
        let seen = epoch.current();
        if let Some((at, level)) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(id)
            && *at == seen
        {
            return Ok(*level);
        }
        let level = self.level_from_db(id)?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(id.clone(), (seen, level));
        Ok(level)
    }

    fn level_from_db(&self, id: &Identity) -> Result<Sensitivity, ComplianceError> {
        let conn = self.conn()?;
        let raw: Option<i64> = conn
            .prepare_cached(SELECT_LEVEL)
            .and_then(|mut s| {
                s.query_row(params![id.user(), id.session()], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| self.sql_error(e))?;
        raw.map_or(Ok(Sensitivity::Public), |v| self.decode(v))
    }

    /// The session's level, or [`Sensitivity::Secret`] with the error when it cannot be read.
    pub fn level_fail_closed(&self, id: &Identity) -> (Sensitivity, Option<ComplianceError>) {
        match self.level(id) {
            Ok(level) => (level, None),
            Err(e) => (Sensitivity::Secret, Some(e)),
        }
    }

    /// The session's level and the datasets that raised it, read in one transaction.
    pub fn record(&self, id: &Identity) -> Result<SessionRecord, ComplianceError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction().map_err(|e| self.sql_error(e))?;
        let level: Option<i64> = tx
            .prepare_cached(SELECT_LEVEL)
            .and_then(|mut s| {
                s.query_row(params![id.user(), id.session()], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| self.sql_error(e))?;
        let rows: Vec<(String, i64)> = tx
            .prepare_cached(SELECT_DATASETS)
            .and_then(|mut s| {
                s.query_map(params![id.user(), id.session()], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect()
            })
            .map_err(|e| self.sql_error(e))?;
        tx.commit().map_err(|e| self.sql_error(e))?;
        let mut record = SessionRecord {
            level: level.map_or(Ok(Sensitivity::Public), |v| self.decode(v))?,
            datasets: Vec::with_capacity(rows.len()),
        };
        for (name, raw) in rows {
            let level = self.decode(raw)?;
            if level > record.level {
                return Err(self.corrupt(format!(
                    "dataset {name:?} is {level} but its session is {}",
                    record.level
                )));
            }
            record.datasets.push(DatasetRecord { name, level });
        }
        Ok(record)
    }

    /// Records that the session saw `dataset` at `level`; returns the session's level afterwards
    /// (never below `level`, never below what it was). One `BEGIN IMMEDIATE` transaction.
    pub fn escalate(
        &self,
        id: &Identity,
        dataset: &str,
        level: Sensitivity,
    ) -> Result<Sensitivity, ComplianceError> {
        validate_dataset(dataset)?;
        let now = now_rfc3339();
        let raw = level_to_i64(level);
        let mut conn = self.conn()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql_error(e))?;
        let after: i64 = (|| {
            tx.prepare_cached(UPSERT_SESSION)?.execute(params![
                id.user(),
                id.session(),
                raw,
                now
            ])?;
            tx.prepare_cached(UPSERT_DATASET)?.execute(params![
                id.user(),
                id.session(),
                dataset,
                raw,
                now
            ])?;
            tx.prepare_cached(SELECT_LEVEL)?
                .query_row(params![id.user(), id.session()], |r| r.get(0))
        })()
        .map_err(|e| self.sql_error(e))?;
        tx.commit().map_err(|e| self.sql_error(e))?;
        drop(conn);
        if let Some(epoch) = &self.epoch {
            epoch.bump();
        }
        let after = self.decode(after)?;
        if after < level {
            return Err(self.corrupt(format!("level {after} after escalating to {level}")));
        }
        Ok(after)
    }

    fn conn(&self) -> Result<MutexGuard<'_, Connection>, ComplianceError> {
        let mutex = self.state.as_ref().map_err(Clone::clone)?;
        // A panic while holding the lock cannot leave a half-written state: an open
        // transaction rolls back when dropped, so the connection stays usable.
        Ok(mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    fn decode(&self, raw: i64) -> Result<Sensitivity, ComplianceError> {
        usize::try_from(raw)
            .ok()
            .and_then(|i| Sensitivity::ALL.get(i).copied())
            .ok_or_else(|| self.corrupt(format!("level {raw} out of range")))
    }

    fn corrupt(&self, detail: String) -> ComplianceError {
        ComplianceError::Corrupt {
            path: self.path.clone(),
            detail,
        }
    }

    fn sql_error(&self, e: rusqlite::Error) -> ComplianceError {
        map_sql_error(&self.path, e)
    }
}

fn level_to_i64(level: Sensitivity) -> i64 {
    match level {
        Sensitivity::Public => 0,
        Sensitivity::Internal => 1,
        Sensitivity::Confidential => 2,
        Sensitivity::Secret => 3,
    }
}

fn validate_dataset(name: &str) -> Result<(), ComplianceError> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_DATASET_LEN {
        "longer than 256 bytes"
    } else if name.chars().any(char::is_control) {
        "contains a control character"
    } else {
        return Ok(());
    };
    Err(ComplianceError::InvalidDataset {
        name: name.chars().take(64).collect(),
        reason,
    })
}

/// Classifies a SQLite error: damaged files are `Corrupt`, everything else `Unavailable`/`Io`.
fn map_sql_error(path: &Path, e: rusqlite::Error) -> ComplianceError {
    let path = path.to_path_buf();
    let detail = e.to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            ComplianceError::Corrupt { path, detail }
        }
        Some(ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => ComplianceError::Io {
            path,
            kind: std::io::ErrorKind::PermissionDenied,
            detail,
        },
        Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull) => ComplianceError::Io {
            path,
            kind: std::io::ErrorKind::Other,
            detail,
        },
        _ => ComplianceError::Unavailable { path, detail },
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ComplianceError {
    ComplianceError::Io {
        path: path.to_path_buf(),
        kind: e.kind(),
        detail: e.to_string(),
    }
}

/// Opens an existing store or creates one. A new store is built under a temporary name and
/// linked into place, so the path never names an empty or half-initialised database: an
/// existing empty file is refused as corrupt rather than read as "no records".
fn connect(path: &Path) -> Result<Connection, ComplianceError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io_error(dir, e))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path)?,
        Err(e) => return Err(io_error(path, e)),
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| map_sql_error(path, e))?;
    configure(&conn).map_err(|e| map_sql_error(path, e))?;
    check_schema(path, &conn)?;
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| map_sql_error(path, e))?;
    if check != "ok" {
        return Err(ComplianceError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("quick_check: {check}"),
        });
    }
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

fn check_schema(path: &Path, conn: &Connection) -> Result<(), ComplianceError> {
    let read = |pragma: &str| -> Result<i64, ComplianceError> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .map_err(|e| map_sql_error(path, e))
    };
    let (app, version) = (read("application_id")?, read("user_version")?);
    if app != APPLICATION_ID || version != SCHEMA_VERSION {
        return Err(ComplianceError::SchemaMismatch {
            path: path.to_path_buf(),
            found: format!("application_id {app:#x} version {version}"),
            expected: format!("application_id {APPLICATION_ID:#x} version {SCHEMA_VERSION}"),
        });
    }
    Ok(())
}

/// Builds a fresh store beside `path` and links it into place unless another process won.
fn create(path: &Path) -> Result<(), ComplianceError> {
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let tmp = path.with_file_name(format!(
        ".{name}.init-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let result = (|| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io_error(&tmp, e))?;
        let conn = Connection::open_with_flags(&tmp, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(|e| map_sql_error(&tmp, e))?;
        let init = (|| {
            configure(&conn)?;
            conn.execute_batch(SCHEMA)?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)?;
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
        })();
        init.map_err(|e| map_sql_error(&tmp, e))?;
        conn.close().map_err(|(_, e)| map_sql_error(&tmp, e))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io_error(path, e)),
        }
    })();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = tmp.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    result
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(u: &str, s: &str) -> Identity {
        Identity::new(u, s).unwrap()
    }

    #[test]
    fn fresh_store_is_public_and_private_to_owner() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/compliance.db");
        let store = ComplianceStore::open(&path).unwrap();
        assert_eq!(store.level(&id("a", "s")).unwrap(), Sensitivity::Public);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        store
            .escalate(&id("a", "s"), "d", Sensitivity::Internal)
            .unwrap();
        let wal = path.with_file_name("compliance.db-wal");
        assert_eq!(
            mode(&wal),
            0o600,
            "sqlite's side files copy the store's mode"
        );
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".init-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn triggers_refuse_lowering_even_through_raw_sql() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let store = ComplianceStore::open(&path).unwrap();
        store
            .escalate(&id("a", "s"), "d", Sensitivity::Secret)
            .unwrap();
        let conn = store.conn().unwrap();
        assert!(conn.execute("UPDATE sessions SET level = 0", []).is_err());
        assert!(conn.execute("DELETE FROM datasets", []).is_err());
        assert!(conn.execute("UPDATE datasets SET level = 1", []).is_err());
        drop(conn);
        assert_eq!(store.level(&id("a", "s")).unwrap(), Sensitivity::Secret);
    }

    #[test]
    fn bad_dataset_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = ComplianceStore::open(&dir.path().join("c.db")).unwrap();
        for bad in ["", "a\nb", &"x".repeat(MAX_DATASET_LEN + 1)] {
            let e = store.escalate(&id("a", "s"), bad, Sensitivity::Secret);
            assert!(
                matches!(e, Err(ComplianceError::InvalidDataset { .. })),
                "{bad:?}"
            );
        }
    }

    /// Not asserted: prints the cost of the hot path and of a durable escalation.
    #[test]
    fn cost_of_level_and_escalate() {
        let dir = tempfile::tempdir().unwrap();
        let store = ComplianceStore::open(&dir.path().join("c.db")).unwrap();
        let who = id("alice", "s1");
        store.escalate(&who, "d", Sensitivity::Internal).unwrap();
        let n = 20_000u32;
        let t = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(store.level(&who).unwrap());
        }
        let level_ns = t.elapsed().as_nanos() / u128::from(n);
        let m = 200u32;
        let t = std::time::Instant::now();
        for i in 0..m {
            // A new dataset each time: a real write and fsync.
            let d = format!("new{i}");
            store.escalate(&who, &d, Sensitivity::Internal).unwrap();
        }
        let esc_us = t.elapsed().as_micros() / u128::from(m);
        let t = std::time::Instant::now();
        for _ in 0..m {
            // Nothing changes: SQLite leaves the pages clean, no fsync.
            store.escalate(&who, "d", Sensitivity::Internal).unwrap();
        }
        let noop_us = t.elapsed().as_micros() / u128::from(m);
        println!(
            "compliance cost: level() {level_ns} ns/call, escalate() {esc_us} us/call \
             (writing), {noop_us} us/call (unchanged)"
        );
    }
}
