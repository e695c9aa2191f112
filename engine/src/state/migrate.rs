//! `bulkhead state migrate`: folds the stores of single servers (from before trust domains, when
//! each server kept its own: `compliance-<server>.db`, or the server's scope in PostgreSQL) into
//! the trust domain's store, which every server of the domain shares.
//!
//! Never lower: every session of every folded store is raised in the domain's store to its level
//! there (with its datasets), through the same exclusive pass and escalation every call uses;
//! raising is a `max()`, so running the migration twice, or over a domain store that already holds
//! newer levels, lowers nothing. Then each workspace layer's marker that named the folded store
//! names the domain's store, and the folded store is retired (the SQLite files renamed
//! `*.migrated`; the PostgreSQL scope recorded in `bulkhead_migrated`). Until then, an instance
//! of that server refuses to start (`init::open_store`), so no level is read from the wrong store.
//! Run it with every instance stopped; a crash part way leaves the old store in place, and
//! running it again finishes the job.

use super::init::StoreMarker;
use super::{StateError, StateErrorKind, StateStore, StoreLocation, StoreOptions};
use crate::identity::Identity;
use crate::policy::Sensitivity;
use std::path::PathBuf;

/// One folded store.
#[derive(Debug)]
pub struct Folded {
    /// The server it belonged to.
    pub server: String,
    /// Its sessions, now in the domain's store at no lower level.
    pub sessions: usize,
    /// The workspace markers rewritten.
    pub markers: usize,
}

/// The sessions of a folded store: (user, session, level, datasets).
type Sessions = Vec<(String, String, Sensitivity, Vec<(String, Sensitivity)>)>;

/// Reads a per-server SQLite store directly (read-only).
fn read_sqlite(db: &std::path::Path) -> Result<(String, Sessions), StateError> {
    let err = |e: rusqlite::Error| {
        StateError::new(StateErrorKind::Corrupt, format!("{}: {e}", db.display()))
    };
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(err)?;
    let id: String = conn
        .query_row("SELECT store_id FROM meta WHERE one = 1", [], |r| r.get(0))
        .map_err(err)?;
    let mut out: Sessions = Vec::new();
    let mut st = conn
        .prepare("SELECT user, session, level FROM sessions ORDER BY user, session")
        .map_err(err)?;
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(err)?;
    for row in rows {
        let (u, s, l) = row.map_err(err)?;
        let mut ds = conn
            .prepare(
                "SELECT name, level FROM datasets WHERE user = ?1 AND session = ?2 ORDER BY name",
            )
            .map_err(err)?;
        let datasets = ds
            .query_map([&u, &s], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let datasets = datasets
            .into_iter()
            .map(|(n, l)| Ok((n, super::level_from_i64(l)?)))
            .collect::<Result<Vec<_>, StateError>>()?;
        out.push((u, s, super::level_from_i64(l)?, datasets));
    }
    Ok((id, out))
}

/// Reads a server's scope of a PostgreSQL store.
async fn read_postgres(
    store: &super::postgres::PgStore,
    server: &str,
) -> Result<Option<(String, Sessions)>, StateError> {
    let db = |e: tokio_postgres::Error| {
        StateError::new(StateErrorKind::Unavailable, format!("postgres: {e}"))
    };
    let conn =
        store.pool().get().await.map_err(|e| {
            StateError::new(StateErrorKind::Unavailable, format!("postgres pool: {e}"))
        })?;
    let Some(row) = conn
        .query_opt(
            "SELECT s.store_id FROM bulkhead_stores s WHERE s.server = $1 AND NOT EXISTS (SELECT 1 FROM bulkhead_migrated m WHERE m.scope = s.server)",
            &[&server],
        )
        .await
        .map_err(db)?
    else {
        return Ok(None);
    };
    let id: String = row.get(0);
    let mut out: Sessions = Vec::new();
    for r in conn
        .query(
            "SELECT \"user\", session, level FROM bulkhead_sessions WHERE server = $1 ORDER BY 1, 2",
            &[&server],
        )
        .await
        .map_err(db)?
    {
        let (u, s, l): (String, String, i16) = (r.get(0), r.get(1), r.get(2));
        let datasets = conn
            .query(
                "SELECT name, level FROM bulkhead_datasets WHERE server = $1 AND \"user\" = $2 AND session = $3 ORDER BY name",
                &[&server, &u, &s],
            )
            .await
            .map_err(db)?
            .iter()
            .map(|d| Ok((d.get::<_, String>(0), super::level_from_i64(i64::from(d.get::<_, i16>(1)))?)))
            .collect::<Result<Vec<_>, StateError>>()?;
        out.push((u, s, super::level_from_i64(i64::from(l))?, datasets));
    }
    Ok(Some((id, out)))
}

/// Raises every session of `sessions` in `store` to at least its level.
async fn raise_all(
    store: &StateStore,
    server: &str,
    sessions: &Sessions,
) -> Result<(), StateError> {
    for (u, s, level, datasets) in sessions {
        let id = Identity::new(u.clone(), s.clone()).map_err(|e| {
            StateError::new(StateErrorKind::Corrupt, format!("session {u}/{s}: {e}"))
        })?;
        let mut pass = store.enter_exclusive(&id).await?;
        let mut result = Ok(());
        for (name, l) in datasets {
            if let Err(e) = store.escalate(&mut pass, name, *l).await {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() && datasets.iter().all(|(_, l)| l < level) {
            result = store
                .escalate(&mut pass, &format!("migrated:{server}"), *level)
                .await
                .map(drop);
        }
        store.leave(pass).await;
        result?;
    }
    Ok(())
}

/// Points every marker among `layers` that names `from` at `to`; a marker naming a third store is
/// an error (that layer belongs elsewhere).
fn rewrite_markers(
    layers: &[PathBuf],
    from: &str,
    to: &str,
    location: &str,
) -> Result<usize, StateError> {
    let mut n = 0;
    for layer in layers {
        let marker = StoreMarker::at(layer);
        match marker.read()? {
            Some(id) if id == from => {
                marker.write(to, location)?;
                n += 1;
            }
            Some(id) if id == to => {}
            Some(id) => {
                return Err(StateError::new(
                    StateErrorKind::Tampered,
                    format!(
                        "{} belongs to store {id}, neither the folded store {from} nor the domain's {to}",
                        layer.display()
                    ),
                ));
            }
            None => {}
        }
    }
    Ok(n)
}

/// Folds the per-server stores of `servers` (each with its workspace layers) into the store of
/// `options.scope` at `location` (created when missing).
pub async fn migrate(
    location: &StoreLocation,
    state_dir: &std::path::Path,
    options: StoreOptions,
    servers: &[(String, Vec<PathBuf>)],
) -> Result<Vec<Folded>, StateError> {
    let mut domain_opts = options.clone();
    domain_opts.server = options.scope.clone();
    let store = match location {
        StoreLocation::Sqlite { db } => {
            if !super::sqlite::SqliteStore::exists(db) {
                super::sqlite::SqliteStore::create(db)?;
            }
            StateStore::Sqlite(super::sqlite::SqliteStore::open(db, domain_opts)?)
        }
        StoreLocation::Postgres(pg) => {
            StateStore::Postgres(super::postgres::PgStore::open(pg, domain_opts, true).await?)
        }
    };
    let mut out = Vec::new();
    for (server, layers) in servers {
        let (from, sessions) = match (location, &store) {
            (StoreLocation::Sqlite { db }, _) => {
                let legacy = super::location::per_server_db(state_dir, server);
                if legacy == *db || !legacy.exists() {
                    continue;
                }
                read_sqlite(&legacy)?
            }
            (StoreLocation::Postgres(_), StateStore::Postgres(pg)) => {
                if *server == options.scope {
                    continue;
                }
                match read_postgres(pg, server).await? {
                    Some(found) => found,
                    None => continue,
                }
            }
            _ => continue,
        };
        raise_all(&store, server, &sessions).await?;
        let markers = rewrite_markers(layers, &from, store.store_id(), &location.describe())?;
        match (location, &store) {
            (StoreLocation::Sqlite { .. }, _) => {
                let legacy = super::location::per_server_db(state_dir, server);
                for p in [legacy.clone(), super::sqlite::lock_path(&legacy)] {
                    if p.exists() {
                        let mut to = p.clone().into_os_string();
                        to.push(".migrated");
                        std::fs::rename(&p, &to)
                            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &p, e))?;
                    }
                }
            }
            (_, StateStore::Postgres(pg)) => {
                let conn = pg.pool().get().await.map_err(|e| {
                    StateError::new(StateErrorKind::Unavailable, format!("postgres pool: {e}"))
                })?;
                conn.execute(
                    "INSERT INTO bulkhead_migrated (scope, into_scope) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[server, &options.scope],
                )
                .await
                .map_err(|e| StateError::new(StateErrorKind::Unavailable, format!("postgres: {e}")))?;
            }
            _ => {}
        }
        out.push(Folded {
            server: server.clone(),
            sessions: sessions.len(),
            markers,
        });
    }
    Ok(out)
}
