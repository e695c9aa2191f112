//! The PostgreSQL backend, for replicas on several machines. The same protocol as SQLite, with
//! the database as the only shared thing: session locks are advisory locks held on the call's
//! pooled connection (PostgreSQL drops them when a crashed process's connection ends), the level
//! is read in a snapshot taken after the lock is granted, an escalation is one function call, and
//! triggers refuse any lowering, deletion or truncation.

pub(crate) mod keep;

use super::Hold;
use super::keep::Keeper;
use super::{
    DatasetRecord, Pass, PassMode, SessionRecord, StateError, StateErrorKind, StoreOptions,
    level_from_i64, level_to_i64,
};
use crate::identity::Identity;
use crate::pg_tls::PgTarget;
use crate::policy::Sensitivity;
use deadpool_postgres::{ManagerConfig, Object, Pool, RecyclingMethod};
use std::time::Duration;

const SCHEMA: &str = include_str!("schema.sql");
/// Advisory lock key that serialises schema set-up between instances starting together.
const SCHEMA_LOCK: i64 = 0x4248_5343_4845_4d41; // "BHSCHEMA"

/// Settings of a PostgreSQL store.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database` (the password usually from `${VAR}`).
    pub url: String,
    /// A folder with the store's Unix socket, used instead of the URL's hosts (same port,
    /// database, user and password).
    pub socket_dir: Option<std::path::PathBuf>,
    /// Most connections of this process (each running call holds one).
    pub pool_size: usize,
    /// Longest wait for a connection or a TCP connect.
    pub connect_timeout: Duration,
}

impl PgOptions {
    /// The server to connect to: the URL's (its `sslmode` and `sslrootcert` read by
    /// [`PgTarget`]), through the socket folder when there is one (the one place every
    /// connection to the store is configured).
    pub fn target(&self) -> Result<PgTarget, String> {
        let target = PgTarget::parse(&self.url)?;
        Ok(match &self.socket_dir {
            Some(dir) => target.via_socket(dir),
            None => target,
        })
    }
}

/// A PostgreSQL store.
pub struct PgStore {
    pool: Pool,
    /// The server and connection settings (the keeper connection is made from them).
    target: PgTarget,
    /// Shared passes kept across calls, and the connection holding their locks.
    keeper: Keeper,
    keeper_conn: keep::KeeperSlot,
    /// The scope (trust domain) whose sessions this store holds.
    server: String,
    store_id: String,
}

/// A session lock held on a pooled connection. Dropped without [`PgStore::leave`], it unlocks in
/// the background, or closes the connection (which ends every lock it held).
pub struct PgHold {
    conn: Option<Object>,
    key: i64,
    mode: PassMode,
}

impl Drop for PgHold {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let (key, mode) = (self.key, self.mode);
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(unlock(conn, key, mode));
            }
            Err(_) => drop(Object::take(conn)),
        }
    }
}

impl PgHold {
    /// Whether a call waits for this advisory lock exclusively: the waiting lock itself is
    /// visible in `pg_locks` (a bigint key is `classid` high half, `objid` low half). Asked on
    /// the hold's own connection, so it never waits for the pool.
    pub(crate) async fn escalation_waiting(&self) -> Result<bool, StateError> {
        let conn = self.conn.as_ref().expect("held until drop");
        let key = self.key as u64;
        let (hi, lo) = ((key >> 32) as i64, (key & 0xffff_ffff) as i64);
        let stmt = conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                 AND mode = 'ExclusiveLock' AND objsubid = 1 AND classid::bigint = $1 \
                 AND objid::bigint = $2 AND database = \
                 (SELECT oid FROM pg_database WHERE datname = current_database()))",
            )
            .await
            .map_err(db_error)?;
        let row = conn.query_one(&stmt, &[&hi, &lo]).await.map_err(db_error)?;
        Ok(row.get(0))
    }
}

async fn unlock(conn: Object, key: i64, mode: PassMode) {
    let sql = match mode {
        PassMode::Shared => "SELECT pg_advisory_unlock_shared($1)",
        PassMode::Exclusive => "SELECT pg_advisory_unlock($1)",
    };
    // A prepared statement (cached on the connection): a plain string would be parsed and
    // described by the server on every call, a round trip and a plan of its own.
    let ok = match conn.prepare_cached(sql).await {
        Ok(stmt) => match conn.query_one(&stmt, &[&key]).await {
            Ok(row) => row.get::<_, bool>(0),
            Err(_) => false,
        },
        Err(_) => false,
    };
    if !ok {
        // Never return a connection that may still hold a lock to the pool.
        drop(Object::take(conn));
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("server", &self.server)
            .field("store_id", &self.store_id)
            .finish()
    }
}

fn pg_error(
    e: impl std::fmt::Display,
    code: Option<&tokio_postgres::error::SqlState>,
) -> StateError {
    use tokio_postgres::error::SqlState;
    let kind = match code {
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE || *c == SqlState::QUERY_CANCELED => {
            StateErrorKind::Busy
        }
        Some(c) if *c == SqlState::UNDEFINED_TABLE || *c == SqlState::UNDEFINED_FUNCTION => {
            StateErrorKind::Schema
        }
        _ => StateErrorKind::Unavailable,
    };
    StateError::new(kind, format!("postgres: {e}"))
}

fn db_error(e: tokio_postgres::Error) -> StateError {
    let code = e.code().cloned();
    pg_error(with_causes(&e), code.as_ref())
}

/// An error and its causes (tokio-postgres's own text names only the kind: "db error",
/// "error performing TLS handshake").
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

fn pool_error(e: deadpool_postgres::PoolError) -> StateError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => db_error(e),
        deadpool_postgres::PoolError::Timeout(_) => StateError::new(
            StateErrorKind::Busy,
            "postgres: no connection free within the connect timeout (state.postgres.pool_size)",
        ),
        other => StateError::new(StateErrorKind::Unavailable, format!("postgres: {other}")),
    }
}

impl PgStore {
    /// Connects, applies the schema, and opens the store of `options.server`. With `create`, a
    /// missing store row is created; without, it is refused as missing.
    pub async fn open(
        pg: &PgOptions,
        options: StoreOptions,
        create: bool,
    ) -> Result<PgStore, StateError> {
        let mut target = pg
            .target()
            .map_err(|e| StateError::new(StateErrorKind::Unavailable, e))?;
        let lock_ms = options.lock_timeout.as_millis().max(1);
        target
            .config_mut()
            .application_name("bulkhead")
            .connect_timeout(pg.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .options(format!("-c lock_timeout={lock_ms}"));
        let manager = target.manager(ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        });
        let pool = Pool::builder(manager)
            .max_size(pg.pool_size.max(2))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(options.lock_timeout))
            .create_timeout(Some(pg.connect_timeout))
            .build()
            .map_err(|e| {
                StateError::new(StateErrorKind::Unavailable, format!("postgres pool: {e}"))
            })?;
        let conn = pool.get().await.map_err(pool_error)?;
        conn.batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA}\nCOMMIT;"
        ))
        .await
        .map_err(db_error)?;
        // A server's own scope from before trust domains, not folded into its domain yet: its
        // levels would be missed, so nothing serves until `bulkhead state migrate` ran.
        if options.scope != options.server {
            let legacy = conn
                .query_opt(
                    "SELECT 1 FROM bulkhead_stores s WHERE s.server = $1 AND NOT EXISTS (SELECT 1 FROM bulkhead_migrated m WHERE m.scope = s.server)",
                    &[&options.server],
                )
                .await
                .map_err(db_error)?;
            if legacy.is_some() {
                return Err(StateError::new(
                    StateErrorKind::Schema,
                    format!(
                        "postgres holds the per-server store of `{}` from before trust domains; stop its instances and run `bulkhead state migrate` to fold it into trust domain `{}`",
                        options.server, options.scope
                    ),
                ));
            }
        }
        let server = options.scope.clone();
        let select = "SELECT store_id FROM bulkhead_stores WHERE server = $1";
        let mut row = conn.query_opt(select, &[&server]).await.map_err(db_error)?;
        if row.is_none() && create {
            let id = super::new_store_id();
            conn.execute(
                "INSERT INTO bulkhead_stores (server, store_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&server, &id],
            )
            .await
            .map_err(db_error)?;
            row = conn.query_opt(select, &[&server]).await.map_err(db_error)?;
        }
        let Some(row) = row else {
            return Err(StateError::new(
                StateErrorKind::Missing,
                format!("postgres: no store for trust domain `{server}`"),
            ));
        };
        Ok(PgStore {
            pool,
            target,
            keeper: Keeper::new(options.keep),
            keeper_conn: keep::KeeperSlot::default(),
            store_id: row.get(0),
            server,
        })
    }

    /// The store's id.
    pub fn store_id(&self) -> &str {
        &self.store_id
    }

    /// The server and how connections to it are opened (a cancel request opens one more).
    pub fn target(&self) -> &PgTarget {
        &self.target
    }

    /// The pool (the audit sink and the tests use it).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The scope (trust domain) whose sessions this store holds.
    pub fn scope(&self) -> &str {
        &self.server
    }

    fn key(&self, id: &Identity) -> i64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.server.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h ^ super::session_hash(id)) as i64
    }

    pub(crate) async fn enter(&self, id: &Identity, mode: PassMode) -> Result<Pass, StateError> {
        if mode == PassMode::Shared {
            if let Some(pass) = self.keeper.join(id) {
                return Ok(pass);
            }
            if self.keeper.may_keep(id)
                && let Some(pass) = self.enter_kept(id).await?
            {
                return Ok(pass);
            }
        }
        let _escalating = (mode == PassMode::Exclusive).then(|| self.keeper.escalating(id));
        let conn = self.pool.get().await.map_err(pool_error)?;
        let key = self.key(id);
        let stmt = conn
            .prepare_cached("SELECT level, store_id FROM bulkhead_enter($1, $2, $3, $4, $5)")
            .await
            .map_err(db_error)?;
        let exclusive = mode == PassMode::Exclusive;
        let row = conn
            .query_one(
                &stmt,
                &[&key, &self.server, &id.user(), &id.session(), &exclusive],
            )
            .await
            .map_err(db_error)?;
        // The lock is ours from here: the hold releases it whatever happens next.
        let hold = PgHold {
            conn: Some(conn),
            key,
            mode,
        };
        let level: i16 = row.get(0);
        let store_id: Option<String> = row.get(1);
        self.same_store(store_id.as_deref())?;
        Ok(Pass::new(
            id.clone(),
            level_from_i64(i64::from(level))?,
            mode,
            Hold::Postgres(hold),
        ))
    }

    /// Refuses a level read beside another store's id (or none): the store was replaced or removed.
    fn same_store(&self, store_id: Option<&str>) -> Result<(), StateError> {
        if store_id == Some(self.store_id.as_str()) {
            return Ok(());
        }
        Err(StateError::new(
            StateErrorKind::Tampered,
            format!(
                "postgres: the store of `{}` was replaced or removed",
                self.server
            ),
        ))
    }

    /// A kept pass taken on the keeper connection: `None` when there is none or the lock is not
    /// granted there (the caller then waits in line on a pooled connection).
    async fn enter_kept(&self, id: &Identity) -> Result<Option<Pass>, StateError> {
        let Some(conn) = self.keeper_conn.get(&self.target).await else {
            return Ok(None);
        };
        let Ok(Some((hold, level, store_id))) = conn
            .try_keep(self.key(id), &self.server, id.user(), id.session())
            .await
        else {
            return Ok(None);
        };
        self.same_store(store_id.as_deref())?;
        let pass = Pass::new(
            id.clone(),
            level_from_i64(i64::from(level))?,
            PassMode::Shared,
            Hold::PostgresKept(hold),
        );
        let (pass, start) = self.keeper.keep(pass);
        if start {
            self.start_sweeper(conn);
        }
        Ok(Some(pass))
    }

    /// The kept passes' sweeper: a task asking, once per check, which keys an escalation waits
    /// for; it ends when nothing is kept (or the store is dropped).
    fn start_sweeper(&self, conn: std::sync::Arc<keep::KeeperConn>) {
        let weak = self.keeper.weak();
        tokio::spawn(async move {
            while let Some(check) = weak.check() {
                tokio::time::sleep(check).await;
                // Ask on the connection the passes are kept on (the one given, or a newer one).
                let conns = weak.holds(|h| match h {
                    Hold::PostgresKept(k) if k.is_live() => Some(k.conn()),
                    _ => None,
                });
                let conn = conns.into_iter().next().unwrap_or_else(|| conn.clone());
                let waiting = conn.waiting().await;
                let more = weak.sweep(|h| match (h, &waiting) {
                    (Hold::PostgresKept(k), Ok(keys)) => keys.contains(&k.key()),
                    _ => true,
                });
                if !more {
                    break;
                }
            }
        });
    }

    pub(crate) async fn escalate(
        &self,
        pass: &mut Pass,
        dataset: &str,
        level: Sensitivity,
    ) -> Result<Sensitivity, StateError> {
        let Hold::Postgres(hold) = &pass.hold else {
            return Err(StateError::new(
                StateErrorKind::Bug,
                "pass of another store",
            ));
        };
        let conn = hold.conn.as_ref().expect("held until drop");
        let id = pass.identity();
        let raw = level_to_i64(level) as i16;
        let after: i16 = conn
            .query_one(
                "SELECT bulkhead_escalate($1, $2, $3, $4, $5)",
                &[&self.server, &id.user(), &id.session(), &dataset, &raw],
            )
            .await
            .map_err(db_error)?
            .get(0);
        crate::failpoint!("state.escalate.after_commit");
        level_from_i64(i64::from(after))
    }

    pub(crate) async fn downgrade(&self, pass: &mut Pass) -> Result<(), StateError> {
        let Hold::Postgres(hold) = &mut pass.hold else {
            return Err(StateError::new(
                StateErrorKind::Bug,
                "pass of another store",
            ));
        };
        let conn = hold.conn.as_ref().expect("held until drop");
        let released: bool = conn
            .query_one("SELECT bulkhead_downgrade($1)", &[&hold.key])
            .await
            .map_err(db_error)?
            .get(0);
        if !released {
            return Err(StateError::new(
                StateErrorKind::Bug,
                "exclusive lock was not held",
            ));
        }
        hold.mode = PassMode::Shared;
        pass.set_mode(PassMode::Shared);
        Ok(())
    }

    /// Gives the pass back. The unlock is sent on the pass's own connection but not waited for:
    /// the call's answer leaves after one round trip (the lock and the level read, in
    /// `bulkhead_enter`) instead of two. The lock is released *after* the answer, never before,
    /// so no level can rise while the handler runs; a late release only delays a waiting
    /// escalation. The protocol model (`tests/unit/state/model.rs`) explores every order of a
    /// release against the other steps. The connection returns to the pool once the unlock
    /// answered (or is dropped, if it did not say the lock was held).
    pub(crate) async fn leave(&self, mut pass: Pass) {
        if let Hold::Postgres(hold) = &mut pass.hold
            && let Some(conn) = hold.conn.take()
        {
            tokio::spawn(unlock(conn, hold.key, hold.mode));
        }
    }

    pub(crate) async fn peek(&self, id: &Identity) -> Result<Sensitivity, StateError> {
        let conn = self.pool.get().await.map_err(pool_error)?;
        let row = conn
            .query_opt(
                "SELECT level FROM bulkhead_sessions WHERE server = $1 AND \"user\" = $2 AND session = $3",
                &[&self.server, &id.user(), &id.session()],
            )
            .await
            .map_err(db_error)?;
        row.map_or(Ok(Sensitivity::Public), |r| {
            level_from_i64(i64::from(r.get::<_, i16>(0)))
        })
    }

    pub(crate) async fn record(&self, id: &Identity) -> Result<SessionRecord, StateError> {
        let mut conn = self.pool.get().await.map_err(pool_error)?;
        let tx = conn
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_error)?;
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&self.server, &id.user(), &id.session()];
        let level = tx
            .query_opt(
                "SELECT level FROM bulkhead_sessions WHERE server = $1 AND \"user\" = $2 AND session = $3",
                &args,
            )
            .await
            .map_err(db_error)?
            .map_or(0i16, |r| r.get(0));
        let rows = tx
            .query(
                "SELECT name, level FROM bulkhead_datasets WHERE server = $1 AND \"user\" = $2 AND session = $3 ORDER BY name",
                &args,
            )
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        let mut record = SessionRecord {
            level: level_from_i64(i64::from(level))?,
            datasets: Vec::with_capacity(rows.len()),
        };
        for r in rows {
            record.datasets.push(DatasetRecord {
                name: r.get(0),
                level: level_from_i64(i64::from(r.get::<_, i16>(1)))?,
            });
        }
        Ok(record)
    }

    pub(crate) async fn check(&self) -> Result<(), StateError> {
        let conn = self.pool.get().await.map_err(pool_error)?;
        let row = conn
            .query_opt(
                "SELECT store_id FROM bulkhead_stores WHERE server = $1",
                &[&self.server],
            )
            .await
            .map_err(db_error)?;
        match row {
            Some(r) if r.get::<_, String>(0) == self.store_id => Ok(()),
            _ => Err(StateError::new(
                StateErrorKind::Tampered,
                format!(
                    "postgres: the store of `{}` was replaced or removed",
                    self.server
                ),
            )),
        }
    }
}
