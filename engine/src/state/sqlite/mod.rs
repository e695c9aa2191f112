//! The SQLite backend: a database (levels, datasets, the store's identity and generation) and a
//! lock file (per-session locks and change counters) in the state directory, shared by every
//! instance of the server on the host.

mod db;
pub mod slots;

pub use db::SCHEMA_VERSION;

use super::Hold;
use super::keep::Keeper;
use super::{
    DatasetRecord, Pass, PassMode, SessionRecord, StateError, StateErrorKind, StoreOptions,
    level_from_i64, level_to_i64, session_hash,
};
use crate::identity::Identity;
use crate::policy::Sensitivity;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use slots::{SlotFile, SlotHold};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most sessions cached per process before the cache is cleared (it only saves reads).
const CACHE_LIMIT: usize = 100_000;

/// A SQLite store. `Send + Sync`; cheap to share behind an `Arc`.
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// The database file's (device, inode) as opened: an escalation into a file that was
    /// deleted or replaced since would be lost, so it is refused.
    db_file: (u64, u64),
    store_id: String,
    options: StoreOptions,
    slots: Arc<SlotFile>,
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    /// Levels read under a session's lock, keyed by the session's change counter read under the
    /// same hold. Valid only while that counter is unchanged.
    cache: Mutex<HashMap<Identity, (u64, Sensitivity)>>,
    /// Shared passes kept across calls.
    keeper: Keeper,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("store_id", &self.inner.store_id)
            .finish()
    }
}

/// The lock file beside database `db`.
pub fn lock_path(db: &Path) -> PathBuf {
    db.with_extension("lock")
}

impl SqliteStore {
    /// Whether a store exists at `db`.
    pub fn exists(db: &Path) -> bool {
        std::fs::symlink_metadata(db).is_ok()
    }

    /// Creates the store at `db` (directory 0700, files 0600) unless it exists. Never called
    /// implicitly for a store that disappeared: see [`crate::state::init`].
    pub fn create(db: &Path) -> Result<(), StateError> {
        if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| StateError::io(StateErrorKind::Unavailable, dir, e))?;
        }
        db::create(db)
    }

    /// Opens an existing store; refuses a missing, foreign or damaged one. A missing lock file is
    /// recreated (processes holding the old one detect that and refuse every call).
    pub fn open(db: &Path, options: StoreOptions) -> Result<SqliteStore, StateError> {
        let (writer, store_id) = db::open(db)?;
        let db_file = file_id(db)?;
        let reader = db::open_reader(db)?;
        let lock = lock_path(db);
        if std::fs::symlink_metadata(&lock).is_err() {
            let generation: i64 = writer
                .query_row("SELECT generation FROM meta WHERE one = 1", [], |r| {
                    r.get(0)
                })
                .map_err(|e| db::map_sql_error(db, e))?;
            if generation == 0 {
                // A store that never escalated: the first start of a fresh deployment.
                tracing::info!(path = %lock.display(), "creating the lock file");
            } else {
                tracing::warn!(path = %lock.display(), "lock file missing; recreating it");
            }
            SlotFile::create(&lock, &store_id, generation.max(0) as u64)?;
        }
        let slots = SlotFile::open(&lock, &store_id)?;
        let keep = options.keep;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: db.to_path_buf(),
                db_file,
                store_id,
                options,
                slots,
                writer: Mutex::new(writer),
                reader: Mutex::new(reader),
                cache: Mutex::default(),
                keeper: Keeper::new(keep),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The store's id.
    pub fn store_id(&self) -> &str {
        &self.inner.store_id
    }

    pub(crate) async fn enter(&self, id: &Identity, mode: PassMode) -> Result<Pass, StateError> {
        let inner = &self.inner;
        if mode == PassMode::Shared
            && let Some(pass) = inner.keeper.join(id)
        {
            // A joined call reads nothing, but the lock file it holds must still be the store's.
            inner.slots.verify_held()?;
            return Ok(pass);
        }
        let _escalating = (mode == PassMode::Exclusive).then(|| inner.keeper.escalating(id));
        let hold = inner
            .slots
            .lock(session_hash(id), mode, inner.options.lock_timeout)
            .await?;
        crate::failpoint!("state.enter.after_lock");
        let counter = hold.counter()?;
        inner.slots.verify_held()?;
        let cached = lock(&inner.cache).get(id).copied();
        let level = match cached {
            Some((at, level)) if at == counter => level,
            _ => {
                let level = inner.read_checked(id, &hold)?;
                let mut cache = lock(&inner.cache);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(id.clone(), (counter, level));
                level
            }
        };
        // Kept unless an escalation of the session already waits for it (the keeper would only
        // make it wait longer).
        let keep = mode == PassMode::Shared
            && inner.keeper.may_keep(id)
            && !hold.escalation_waiting().unwrap_or(true);
        let pass = Pass::new(id.clone(), level, mode, Hold::Sqlite(hold));
        if !keep {
            return Ok(pass);
        }
        let (pass, start) = inner.keeper.keep(pass);
        if start {
            self.start_sweeper();
        }
        Ok(pass)
    }

    /// The kept passes' sweeper: a thread (kept locks are this process's descriptors, so it must
    /// run whatever runtime the calls came from), ending when nothing is kept.
    fn start_sweeper(&self) {
        let weak = self.inner.keeper.weak();
        let slots = self.inner.slots.clone();
        let spawned = std::thread::Builder::new()
            .name("bulkhead-keep".into())
            .spawn(move || {
                while let Some(check) = weak.check() {
                    std::thread::sleep(check);
                    // One probe for every bucket; each kept pass is asked only when one waits.
                    let any = slots.any_escalation_waiting().unwrap_or(true);
                    let more = weak.sweep(|h| match h {
                        Hold::Sqlite(s) => any && s.escalation_waiting().unwrap_or(true),
                        _ => true,
                    });
                    if !more {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no sweeper thread for kept passes; releasing them");
            self.inner.keeper.drain_all();
        }
    }

    pub(crate) async fn escalate(
        &self,
        pass: &mut Pass,
        dataset: &str,
        level: Sensitivity,
    ) -> Result<Sensitivity, StateError> {
        let Hold::Sqlite(hold) = &pass.hold else {
            return Err(StateError::new(
                StateErrorKind::Bug,
                "pass of another store",
            ));
        };
        let inner = &self.inner;
        inner.slots.verify()?;
        // Bump first: from here every cached level of this session is stale, in every process,
        // whether or not the commit below happens.
        let counter = hold.bump()?;
        crate::failpoint!("state.escalate.after_bump");
        let id = pass.identity().clone();
        inner.verify_db()?;
        let (after, generation) = inner.commit(&id, dataset, level)?;
        crate::failpoint!("state.escalate.after_commit");
        // A commit into a file that was unlinked meanwhile is lost: refuse the call.
        inner.verify_db()?;
        if let Err(e) = hold.raise_high_water(generation, inner.options.lock_timeout) {
            tracing::warn!(error = %e, "could not raise the generation high-water mark");
        }
        lock(&inner.cache).insert(id, (counter, after));
        Ok(after)
    }

    pub(crate) async fn downgrade(&self, pass: &mut Pass) -> Result<(), StateError> {
        let Hold::Sqlite(hold) = &pass.hold else {
            return Err(StateError::new(
                StateErrorKind::Bug,
                "pass of another store",
            ));
        };
        hold.downgrade()?;
        pass.set_mode(PassMode::Shared);
        Ok(())
    }

    pub(crate) fn leave(&self, pass: Pass) {
        drop(pass);
    }

    pub(crate) fn peek(&self, id: &Identity) -> Result<Sensitivity, StateError> {
        let conn = lock(&self.inner.reader);
        let raw: Option<i64> = conn
            .prepare_cached(db::SELECT_LEVEL)
            .and_then(|mut s| {
                s.query_row(params![id.user(), id.session()], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| db::map_sql_error(&self.inner.path, e))?;
        raw.map_or(Ok(Sensitivity::Public), level_from_i64)
    }

    pub(crate) fn record(&self, id: &Identity) -> Result<SessionRecord, StateError> {
        let path = &self.inner.path;
        let mut conn = lock(&self.inner.reader);
        let tx = conn.transaction().map_err(|e| db::map_sql_error(path, e))?;
        let level: Option<i64> = tx
            .prepare_cached(db::SELECT_LEVEL)
            .and_then(|mut s| {
                s.query_row(params![id.user(), id.session()], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| db::map_sql_error(path, e))?;
        let rows: Vec<(String, i64)> = tx
            .prepare_cached(db::SELECT_DATASETS)
            .and_then(|mut s| {
                s.query_map(params![id.user(), id.session()], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect()
            })
            .map_err(|e| db::map_sql_error(path, e))?;
        tx.commit().map_err(|e| db::map_sql_error(path, e))?;
        let mut record = SessionRecord {
            level: level.map_or(Ok(Sensitivity::Public), level_from_i64)?,
            datasets: Vec::with_capacity(rows.len()),
        };
        for (name, raw) in rows {
            let level = level_from_i64(raw)?;
            if level > record.level {
                return Err(StateError::new(
                    StateErrorKind::Corrupt,
                    format!(
                        "dataset {name:?} is {level} but its session is {}",
                        record.level
                    ),
                ));
            }
            record.datasets.push(DatasetRecord { name, level });
        }
        Ok(record)
    }

    pub(crate) fn check(&self) -> Result<(), StateError> {
        self.inner.slots.verify()?;
        let conn = lock(&self.inner.reader);
        let id: String = conn
            .query_row("SELECT store_id FROM meta WHERE one = 1", [], |r| r.get(0))
            .map_err(|e| db::map_sql_error(&self.inner.path, e))?;
        if id != self.inner.store_id {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!("{}: store id changed", self.inner.path.display()),
            ));
        }
        Ok(())
    }
}

impl Inner {
    fn verify_db(&self) -> Result<(), StateError> {
        if file_id(&self.path)? != self.db_file {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!("{}: database was replaced", self.path.display()),
            ));
        }
        Ok(())
    }

    /// The session's level from the database, checked against the lock file's generation
    /// high-water mark (read first), so a database rolled back to an older copy is refused.
    fn read_checked(&self, id: &Identity, hold: &SlotHold) -> Result<Sensitivity, StateError> {
        let high_water = hold.high_water(self.options.lock_timeout)?;
        let conn = lock(&self.reader);
        let (raw, generation): (Option<i64>, Option<i64>) = conn
            .prepare_cached(db::SELECT_LEVEL_AND_GENERATION)
            .and_then(|mut s| {
                s.query_row(params![id.user(), id.session()], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
            })
            .map_err(|e| db::map_sql_error(&self.path, e))?;
        let generation = generation.ok_or_else(|| {
            StateError::new(
                StateErrorKind::Corrupt,
                format!("{}: no meta row", self.path.display()),
            )
        })?;
        if (generation as u64) < high_water {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!(
                    "{}: database generation {generation} is behind the lock file's {high_water} (rolled back)",
                    self.path.display()
                ),
            ));
        }
        raw.map_or(Ok(Sensitivity::Public), level_from_i64)
    }

    /// One `BEGIN IMMEDIATE` transaction: raise the session and the dataset (never lower), bump
    /// the generation; returns the level and the generation after.
    fn commit(
        &self,
        id: &Identity,
        dataset: &str,
        level: Sensitivity,
    ) -> Result<(Sensitivity, u64), StateError> {
        let now = crate::clock::now_rfc3339();
        let raw = level_to_i64(level);
        let mut conn = lock(&self.writer);
        let err = |e| db::map_sql_error(&self.path, e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let (after, generation): (i64, i64) = (|| {
            tx.prepare_cached(db::UPSERT_SESSION)?.execute(params![
                id.user(),
                id.session(),
                raw,
                now
            ])?;
            tx.prepare_cached(db::UPSERT_DATASET)?.execute(params![
                id.user(),
                id.session(),
                dataset,
                raw,
                now
            ])?;
            let generation: i64 = tx
                .prepare_cached(db::BUMP_GENERATION)?
                .query_row([], |r| r.get(0))?;
            let after: i64 = tx
                .prepare_cached(db::SELECT_LEVEL)?
                .query_row(params![id.user(), id.session()], |r| r.get(0))?;
            Ok((after, generation))
        })()
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok((level_from_i64(after)?, generation.max(0) as u64))
    }
}

fn file_id(path: &Path) -> Result<(u64, u64), StateError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok((m.dev(), m.ino())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StateError::io(
            StateErrorKind::Tampered,
            path,
            "database was deleted",
        )),
        Err(e) => Err(StateError::io(StateErrorKind::Unavailable, path, e)),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these cannot leave a half-written state: an open transaction
    // rolls back when dropped, and the cache only saves reads.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
