//! The session state every instance of a server shares: the one-way sensitivity ratchet, held
//! across processes, restarts and machines.
//!
//! # The invariant (enforced here, and only here)
//!
//! Once any process has acknowledged an escalation of a session to level `L`, or any handler has
//! started under `L`, no process serves that session below `L`: no admission decision anywhere
//! is made on a level lower than `L`, and no handler admitted at a lower level is still running.
//!
//! # How
//!
//! Every tool call holds a [`Pass`] on its session for its whole run, from the admission
//! decision to the end of the handler:
//!
//! 1. [`StateStore::enter`] takes the session's lock **shared**, then reads the level. The read is
//!    fresh: a cached level is used only when the session's change counter, read under the same
//!    lock, is unchanged since the level was cached.
//! 2. A call that raises the level gives up its shared pass and takes the lock **exclusively**
//!    ([`StateStore::enter_exclusive`]): it waits until no call of that session runs anywhere. It
//!    reads the level again and the caller decides again (re-admission) before
//!    [`StateStore::escalate`] bumps the change counter and commits. Only then is the pass
//!    downgraded to shared and the handler run.
//!
//! So the level of a session cannot change while any handler of that session runs in any
//! process, and every admission decision is made on the committed level.
//!
//! A process may keep the shared lock step 1 took after its call ends, and later calls of the
//! session in that process join it instead of taking the lock and reading ([`keep`]): they hold
//! a shared pass all the same (the kept one), so nothing above changes. The kept lock goes when
//! an escalation waits for it anywhere, so the wait that adds is bounded (`state.keep_check_ms`).
//!
//! # Fault model
//!
//! Any process may die at any instruction; any file in the state directory may be deleted,
//! replaced, truncated or filled; two instances of one server may race on one session.
//!
//! - **Crash**: locks are released by the kernel (SQLite: open-file-description locks) or by the
//!   server (PostgreSQL: session advisory locks end with the connection). The counter is bumped
//!   *before* the commit, under the exclusive lock, so a crash between the two only costs readers
//!   a cache miss; a commit is never hidden from a cache.
//! - **Deleted or replaced files** are detected (on every call the lock file's name in the held-open
//!   state directory must still name the file first opened, at full length; the whole path is
//!   looked up again every 50 ms and on every escalation; an escalation into a database file that was moved is refused; the store's id is
//!   checked against the marker in the workspace root) and every call then fails closed. A
//!   missing store is never recreated silently ([`init`]).
//! - **Truncated files** read short and fail closed; nothing is memory-mapped, so nothing can fault.
//! - **Rolled-back stores** (an older copy of the database put back) are detected while the lock
//!   file survives: its generation high-water mark is ahead of the database's.
//! - **Out of the model**: rewriting bytes inside the files to chosen values, or restoring the whole
//!   state directory (database *and* lock file) from a backup. File permissions (0700 directory,
//!   0600 files, owned by the service user) are what protect against those.
//!
//! The residual window, stated: a call admitted in a process *before* its lock file was replaced
//! may finish while a process that opened the replacement escalates; every later call in the
//! first process is refused. A replaced state *directory* (rather than files in it) is seen by
//! the whole-path check, up to 50 ms later.

mod error;
pub mod init;
pub mod keep;
pub mod location;
pub mod migrate;
mod pass;
pub mod postgres;
pub mod shared;
pub mod sqlite;

pub use error::{StateError, StateErrorKind};
pub use init::{InitPolicy, StoreMarker};
pub use keep::KeepSettings;
pub use location::StoreLocation;
pub use pass::{Pass, PassMode};

/// A backend's hold on a session's lock, carried by a [`Pass`]; releasing it (explicitly or by
/// drop) ends the pass. Here, beside both backends, so that neither the pass nor a backend
/// reaches into the other.
#[expect(
    clippy::large_enum_variant,
    reason = "one per call in flight, moved rarely; boxing would allocate on every call"
)]
pub(crate) enum Hold {
    Sqlite(sqlite::slots::SlotHold),
    Postgres(postgres::PgHold),
    /// A shared lock on the PostgreSQL keeper connection (`postgres::keep`).
    PostgresKept(postgres::keep::PgKeptHold),
    /// A call joined to its process's kept pass ([`keep`]).
    Kept(keep::Joined),
}

impl Hold {
    /// Whether the lock is still held as far as this process can tell (a PostgreSQL keeper
    /// connection that ended has lost its locks).
    pub(crate) fn is_live(&self) -> bool {
        match self {
            Hold::PostgresKept(h) => h.is_live(),
            Hold::Kept(j) => j.with_hold(Hold::is_live),
            Hold::Sqlite(_) | Hold::Postgres(_) => true,
        }
    }
}

use crate::identity::Identity;
use crate::policy::Sensitivity;
use std::time::Duration;

/// Longest accepted dataset name, in bytes.
pub const MAX_DATASET_LEN: usize = 256;

/// One dataset that raised a session, at the highest level it was seen with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetRecord {
    /// The dataset's name as given to [`StateStore::escalate`].
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

/// Settings shared by both backends.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The server opening the store (named in messages).
    pub server: String,
    /// Whose sessions the store holds: the trust domain (every server of a deployment by
    /// default), so one agent session has one level across servers. [`StoreOptions::new`] scopes
    /// by the server name (tests and benchmarks of one server).
    pub scope: String,
    /// Longest wait for a session's lock before the call is refused as busy.
    pub lock_timeout: Duration,
    /// How passes are kept across calls ([`keep`]).
    pub keep: KeepSettings,
}

impl StoreOptions {
    /// Options for `server` with the default lock timeout (30 s).
    pub fn new(server: &str) -> StoreOptions {
        StoreOptions {
            server: server.to_owned(),
            scope: server.to_owned(),
            lock_timeout: Duration::from_secs(30),
            keep: KeepSettings::default(),
        }
    }
}

/// The state store of one server: SQLite on one host, PostgreSQL across hosts. Both enforce the
/// same invariant with the same protocol (see the module documentation).
#[expect(
    clippy::large_enum_variant,
    reason = "one per process, opened once and shared behind an Arc"
)]
pub enum StateStore {
    /// The embedded default: a database and a lock file in the state directory.
    Sqlite(sqlite::SqliteStore),
    /// Replicas on several machines.
    Postgres(postgres::PgStore),
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateStore::Sqlite(s) => s.fmt(f),
            StateStore::Postgres(p) => p.fmt(f),
        }
    }
}

// The PostgreSQL arms of the async methods run boxed: their futures (a pooled connection, a round
// trip) are large, and inline they would make every call's future as large on SQLite too.
impl StateStore {
    /// The store's id (recorded in the workspace marker).
    pub fn store_id(&self) -> &str {
        match self {
            StateStore::Sqlite(s) => s.store_id(),
            StateStore::Postgres(p) => p.store_id(),
        }
    }

    /// Takes the session's lock shared and reads its level (step 1 of the protocol).
    pub async fn enter(&self, id: &Identity) -> Result<Pass, StateError> {
        match self {
            StateStore::Sqlite(s) => s.enter(id, PassMode::Shared).await,
            StateStore::Postgres(p) => Box::pin(p.enter(id, PassMode::Shared)).await,
        }
    }

    /// Takes the session's lock exclusively and reads its level (step 2). Drop any shared pass of
    /// the same session first, or this waits for itself until the lock timeout.
    pub async fn enter_exclusive(&self, id: &Identity) -> Result<Pass, StateError> {
        match self {
            StateStore::Sqlite(s) => s.enter(id, PassMode::Exclusive).await,
            StateStore::Postgres(p) => Box::pin(p.enter(id, PassMode::Exclusive)).await,
        }
    }

    /// Whether a call of the pass's session waits to escalate it, anywhere (any process, any server
    /// of the store). Long-running work under a shared pass (a sandbox run) checks this and
    /// stops, so that the escalation proceeds and nothing admitted below the new level runs on.
    pub async fn escalation_waiting(&self, pass: &Pass) -> Result<bool, StateError> {
        enum Ask {
            Now(Result<bool, StateError>),
            Keeper(std::sync::Arc<postgres::keep::KeeperConn>, i64),
        }
        let ask = |hold: &Hold| match hold {
            Hold::Sqlite(h) => Ask::Now(h.escalation_waiting()),
            Hold::PostgresKept(h) => Ask::Keeper(h.conn(), h.key()),
            Hold::Postgres(_) | Hold::Kept(_) => Ask::Now(Err(StateError::new(
                StateErrorKind::Bug,
                "a kept pass holds another kind of hold",
            ))),
        };
        let ask = match &pass.hold {
            Hold::Postgres(h) => return h.escalation_waiting().await,
            Hold::Kept(j) => j.with_hold(ask),
            other => ask(other),
        };
        match ask {
            Ask::Now(r) => r,
            Ask::Keeper(conn, key) => Ok(conn.waiting().await?.contains(&key)),
        }
    }

    /// Records that the session saw `dataset` at `level` and returns the session's level after
    /// (never below `level`, never below what it was). Requires an exclusive pass, which it
    /// downgrades to shared after the commit; the pass's level is the new level.
    pub async fn escalate(
        &self,
        pass: &mut Pass,
        dataset: &str,
        level: Sensitivity,
    ) -> Result<Sensitivity, StateError> {
        validate_dataset(dataset)?;
        if pass.mode() != PassMode::Exclusive {
            return Err(StateError::new(
                StateErrorKind::Bug,
                "escalate needs an exclusive pass",
            ));
        }
        let after = match self {
            StateStore::Sqlite(s) => s.escalate(pass, dataset, level).await?,
            StateStore::Postgres(p) => p.escalate(pass, dataset, level).await?,
        };
        if after < level || after < pass.level() {
            return Err(StateError::new(
                StateErrorKind::Corrupt,
                format!("level {after} after escalating {} to {level}", pass.level()),
            ));
        }
        pass.set_level(after);
        crate::failpoint!("state.escalate.before_downgrade");
        match self {
            StateStore::Sqlite(s) => s.downgrade(pass).await?,
            StateStore::Postgres(p) => p.downgrade(pass).await?,
        }
        Ok(after)
    }

    /// Gives a pass back (explicitly, so errors are seen; dropping a pass also releases it).
    pub async fn leave(&self, pass: Pass) {
        match self {
            StateStore::Sqlite(s) => s.leave(pass),
            StateStore::Postgres(p) => Box::pin(p.leave(pass)).await,
        }
    }

    /// The session's level, read without taking its lock: for reports and error results only,
    /// never for an admission decision. Fails closed to `Secret`.
    pub async fn peek(&self, id: &Identity) -> Sensitivity {
        let r = match self {
            StateStore::Sqlite(s) => s.peek(id),
            StateStore::Postgres(p) => Box::pin(p.peek(id)).await,
        };
        r.unwrap_or(Sensitivity::Secret)
    }

    /// The session's level and the datasets that raised it.
    pub async fn record(&self, id: &Identity) -> Result<SessionRecord, StateError> {
        match self {
            StateStore::Sqlite(s) => s.record(id),
            StateStore::Postgres(p) => p.record(id).await,
        }
    }

    /// The session's level, read under a shared pass (fresh, never from a stale cache).
    pub async fn level(&self, id: &Identity) -> Result<Sensitivity, StateError> {
        let pass = self.enter(id).await?;
        let level = pass.level();
        self.leave(pass).await;
        Ok(level)
    }

    /// Records `dataset` at `level` for the session outside any tool call (exclusive pass,
    /// escalation, release); returns the level after.
    pub async fn raise(
        &self,
        id: &Identity,
        dataset: &str,
        level: Sensitivity,
    ) -> Result<Sensitivity, StateError> {
        let mut pass = self.enter_exclusive(id).await?;
        let after = self.escalate(&mut pass, dataset, level).await;
        self.leave(pass).await;
        after
    }

    /// Creates a SQLite store at `db` unless one exists, and opens it: explicit creation, for
    /// `bulkhead state init`, tests and benchmarks. Serving goes through [`init::open_store`].
    pub fn create_sqlite(
        db: &std::path::Path,
        options: StoreOptions,
    ) -> Result<StateStore, StateError> {
        if !sqlite::SqliteStore::exists(db) {
            sqlite::SqliteStore::create(db)?;
        }
        Ok(StateStore::Sqlite(sqlite::SqliteStore::open(db, options)?))
    }

    /// Whether the store answers and its files or tables are the ones opened (for readiness).
    pub async fn check(&self) -> Result<(), StateError> {
        match self {
            StateStore::Sqlite(s) => s.check(),
            StateStore::Postgres(p) => p.check().await,
        }
    }
}

fn validate_dataset(name: &str) -> Result<(), StateError> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > MAX_DATASET_LEN {
        "longer than 256 bytes"
    } else if name.chars().any(char::is_control) {
        "contains a control character"
    } else {
        return Ok(());
    };
    Err(StateError::new(
        StateErrorKind::InvalidDataset,
        format!(
            "invalid dataset name {:?}: {reason}",
            name.chars().take(64).collect::<String>()
        ),
    ))
}

/// Stable 64-bit FNV-1a of a session's (user, session): the same in every process and every
/// build, so all instances agree on which lock slot a session uses.
pub(crate) fn session_hash(id: &Identity) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id
        .user()
        .bytes()
        .chain(std::iter::once(0))
        .chain(id.session().bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub(crate) fn level_to_i64(level: Sensitivity) -> i64 {
    i64::from(level.index())
}

pub(crate) fn level_from_i64(raw: i64) -> Result<Sensitivity, StateError> {
    u8::try_from(raw)
        .ok()
        .and_then(Sensitivity::from_index)
        .ok_or_else(|| {
            StateError::new(StateErrorKind::Corrupt, format!("level {raw} out of range"))
        })
}

/// A new random store id: 32 lowercase hex characters.
pub(crate) fn new_store_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_hash_is_stable_across_builds() {
        // Pinned: every instance of every version must map a session to the same slot.
        let id = Identity::new("alice", "s1").unwrap();
        assert_eq!(session_hash(&id), 0x3603_8279_6b07_d689);
    }
}
