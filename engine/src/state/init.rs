//! A store never silently starts over. A store comes into being only on the first start of a
//! fresh deployment (no marker, no session data in the workspaces) or by `bulkhead state init`;
//! its id is then recorded in a marker file in each workspace layer an instance writes (the
//! server's root for `full`, `<server>.<mode>` for the others; out of every session's reach).
//! From then on a missing store, or a store with another id than any marker the instance can
//! see (its own layer's and the read-only lower ones'), refuses to serve: starting over would
//! forget which sessions hold private data while their files (and the agents' memories) still do.
//!
//! Each instance writes only its own layer's marker: the lower layers are mounted read-only in
//! compose and `bulkhead up`, and on a fresh deployment the instances start in any order.

use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::{StateError, StateErrorKind, StateStore, StoreLocation, StoreOptions};
use crate::identity::Identity;
use crate::policy::Sensitivity;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The marker's file name in a server's workspace root.
pub const MARKER: &str = ".bulkhead-store";

/// When a missing store may be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitPolicy {
    /// Never: the store must exist.
    MustExist,
    /// Only for a fresh deployment: no marker and no session data in the workspace root.
    FirstStart,
    /// Always (`bulkhead state init`); the marker must not name another store.
    Create,
}

/// The marker recording which store a workspace root belongs to.
#[derive(Clone, Debug)]
pub struct StoreMarker {
    path: PathBuf,
}

impl StoreMarker {
    /// The marker of the workspace root `root`.
    pub fn at(root: &Path) -> StoreMarker {
        StoreMarker {
            path: root.join(MARKER),
        }
    }

    /// The store id the marker names, if there is a marker.
    pub fn read(&self) -> Result<Option<String>, StateError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => text
                .lines()
                .find_map(|l| l.strip_prefix("store "))
                .map(|id| Some(id.trim().to_owned()))
                .ok_or_else(|| {
                    StateError::new(
                        StateErrorKind::Corrupt,
                        format!("{}: not a store marker", self.path.display()),
                    )
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StateError::io(StateErrorKind::Unavailable, &self.path, e)),
        }
    }

    /// Records `store_id` (durably), replacing any earlier marker.
    pub fn write(&self, store_id: &str, location: &str) -> Result<(), StateError> {
        let err = |e| StateError::io(StateErrorKind::Unavailable, &self.path, e);
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        // Unique across processes of every container sharing the volume (pids repeat there).
        let tmp = self.path.with_extension(format!(
            "tmp-{}-{}",
            std::process::id(),
            super::new_store_id()
        ));
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(err)?;
        writeln!(
            f,
            "# Bulkhead: these workspaces belong to this compliance store. Do not delete.\nstore {store_id}\nlocation {location}"
        )
        .map_err(err)?;
        f.sync_all().map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)?;
        if let Some(dir) = self.path.parent()
            && let Ok(d) = std::fs::File::open(dir)
        {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// The sessions that have files in a server's workspace root (`<root>/<user>/<session>`).
pub fn sessions_with_files(root: &Path) -> Result<Vec<Identity>, StateError> {
    let mut out = Vec::new();
    let users = match std::fs::read_dir(root) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StateError::io(StateErrorKind::Unavailable, root, e)),
    };
    for user in users.flatten() {
        let name = user.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !user.path().is_dir() {
            continue;
        }
        let Ok(sessions) = std::fs::read_dir(user.path()) else {
            continue;
        };
        for s in sessions.flatten() {
            if let Ok(id) = Identity::new(name.clone(), s.file_name().to_string_lossy()) {
                out.push(id);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The markers an instance sees: its own layer's first, then the lower layers', each with the
/// store id it names (`None`: no marker there).
fn read_markers(
    own: &Path,
    lower: &[PathBuf],
) -> Result<Vec<(PathBuf, Option<String>)>, StateError> {
    std::iter::once(own)
        .chain(lower.iter().map(PathBuf::as_path))
        .map(|root| Ok((root.to_path_buf(), StoreMarker::at(root).read()?)))
        .collect()
}

/// Opens the store of a server under `policy`, checking it against the markers of the workspace
/// layer `own` (which the instance writes) and of the `lower` layers (which it reads), and
/// writing `own`'s marker when it has none.
pub async fn open_store(
    location: &StoreLocation,
    options: StoreOptions,
    own: &Path,
    lower: &[PathBuf],
    policy: InitPolicy,
) -> Result<StateStore, StateError> {
    // A server's own store from before trust domains, not folded into its domain's yet: its
    // levels would be missed, so nothing serves until `bulkhead state migrate` ran.
    // (By file, not by name: a domain named like one of its servers still has its own file.)
    if let StoreLocation::Sqlite { db } = location
        && let Some(dir) = db.parent()
        && let legacy = super::location::per_server_db(dir, &options.server)
        && legacy != *db
        && legacy.exists()
    {
        return Err(StateError::new(
            StateErrorKind::Schema,
            format!(
                "{} is the store of `{}` from before trust domains; stop its instances and run `bulkhead state migrate` to fold it into trust domain `{}` ({})",
                legacy.display(),
                options.server,
                options.scope,
                db.display()
            ),
        ));
    }
    let markers = read_markers(own, lower)?;
    let named: Option<String> = markers.iter().find_map(|(_, id)| id.clone());
    let workspace_root = own;
    let mut has_data = false;
    for root in std::iter::once(own).chain(lower.iter().map(PathBuf::as_path)) {
        has_data |= !sessions_with_files(root)?.is_empty();
    }
    let may_create = match policy {
        InitPolicy::Create => true,
        InitPolicy::FirstStart => named.is_none() && !has_data,
        InitPolicy::MustExist => false,
    };
    let missing = |why: &str| {
        StateError::new(
            StateErrorKind::Missing,
            format!(
                "the compliance store {} is missing, {why}; restore it from a backup, or run `bulkhead state init --server {} --force` to create a new one that holds every session with files at `secret`",
                location.describe(),
                options.server,
            ),
        )
    };
    let store = match location {
        StoreLocation::Sqlite { db } => {
            if !SqliteStore::exists(db) {
                if !may_create {
                    return Err(match &named {
                        Some(id) => missing(&format!(
                            "but the workspaces at {} belong to store {id}",
                            workspace_root.display()
                        )),
                        None => missing(&format!(
                            "but the workspaces at {} hold session data",
                            workspace_root.display()
                        )),
                    });
                }
                SqliteStore::create(db)?;
                tracing::info!(path = %db.display(), "created a new compliance store");
            }
            StateStore::Sqlite(SqliteStore::open(db, options.clone())?)
        }
        StoreLocation::Postgres(pg) => match PgStore::open(pg, options.clone(), may_create).await {
            Err(e) if e.kind() == StateErrorKind::Missing => {
                return Err(missing(&match &named {
                    Some(id) => format!("but the workspaces belong to store {id}"),
                    None => "but the workspaces hold session data".into(),
                }));
            }
            other => StateStore::Postgres(other?),
        },
    };
    for (root, id) in &markers {
        if let Some(id) = id.as_ref().filter(|id| *id != store.store_id()) {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!(
                    "the compliance store {} is {}, but the workspaces at {} belong to store {id}: it was replaced; restore the original, or run `bulkhead state init --server {} --force`",
                    location.describe(),
                    store.store_id(),
                    root.display(),
                    options.server
                ),
            ));
        }
    }
    if markers[0].1.is_none() {
        StoreMarker::at(own).write(store.store_id(), &location.describe())?;
    }
    Ok(store)
}

/// `bulkhead state init --force`: a new store over existing workspaces. Every session with files
/// in any of the server's `layers` (the full root first) is recorded at `secret` first (its
/// history is unknown, so it fails closed), then every existing layer's marker is rewritten.
/// Returns the sessions recovered.
pub async fn force_init(
    location: &StoreLocation,
    options: StoreOptions,
    layers: &[PathBuf],
) -> Result<Vec<Identity>, StateError> {
    let Some(workspace_root) = layers.first() else {
        return Err(StateError::new(
            StateErrorKind::Bug,
            "no workspace layer given",
        ));
    };
    if let StoreLocation::Sqlite { db } = location
        && SqliteStore::exists(db)
    {
        return Err(StateError::new(
            StateErrorKind::Bug,
            format!(
                "{} exists; move it away first if it is really to be replaced",
                db.display()
            ),
        ));
    }
    if let StoreLocation::Sqlite { db } = location {
        // The lost store's lock file names the lost store; instances still holding it refuse
        // every call once it is gone.
        let _ = std::fs::remove_file(super::sqlite::lock_path(db));
    }
    let mut sessions = Vec::new();
    for layer in layers {
        sessions.extend(sessions_with_files(layer)?);
    }
    sessions.sort();
    sessions.dedup();
    let tmp_root = workspace_root.join(".bulkhead-init");
    let store = open_store(location, options, &tmp_root, &[], InitPolicy::Create).await?;
    let _ = std::fs::remove_dir_all(&tmp_root);
    for id in &sessions {
        let mut pass = store.enter_exclusive(id).await?;
        store
            .escalate(&mut pass, "recovered:unknown-history", Sensitivity::Secret)
            .await?;
        store.leave(pass).await;
    }
    for layer in layers.iter().filter(|l| *l == workspace_root || l.is_dir()) {
        StoreMarker::at(layer).write(store.store_id(), &location.describe())?;
    }
    Ok(sessions)
}
