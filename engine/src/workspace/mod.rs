//! Per-session workspaces: agents see `/workspace/...`, the host keeps `<root>/<user>/<session>/...`.
//!
//! Confinement is done by the kernel at open time, not by string checks: every session is a cap-std
//! [`Dir`], which resolves each path beneath that directory (`openat2` with `RESOLVE_BENEATH` on
//! Linux ≥ 5.6, otherwise cap-std's own per-component `openat` walk) and refuses `..`, absolute
//! paths and symlinks that leave it, including a symlink swapped in between a check and a use.

mod copyup;
mod error;
mod lazy;
mod open_dirs;
mod owner;
mod path;
mod quota;
mod results;
mod session;
mod write;

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt as _, OpenOptions, OpenOptionsExt as _};
use rustix::fs::OFlags;

pub use error::WorkspaceError;
pub use lazy::{LazyWorkspace, WorkspaceSource};
pub use open_dirs::{DEFAULT_OPEN_DIRS, REVALIDATE as OPEN_DIR_REVALIDATE};
pub use owner::{DEFAULT_HOST_UID, HostOwner};
pub use path::{AGENT_ROOT, MAX_COMPONENT_LEN, MAX_PATH_LEN, RelPath, agent_to_relative};
pub use quota::{DiskLimits, Usage};
pub use results::{RESULTS_DIR, ResultFile, SavedResult, query_key};
pub use session::{DirEntryInfo, SessionWorkspace};

use crate::identity::Identity;

/// Default largest file [`SessionWorkspace::read`] returns: 64 MiB.
pub const DEFAULT_MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// Mode of every directory the workspace creates.
const DIR_MODE: u32 = 0o700;

/// Prefix of in-flight temp files (written by `write`); listings hide them.
const TEMP_PREFIX: &str = ".bulkhead-tmp-";

/// Whether `name` is one of our in-flight temp files.
fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// The directory that holds every user's sessions, opened once as a capability.
#[derive(Debug)]
pub struct WorkspaceRoot {
    host: PathBuf,
    dir: Dir,
    max_read_bytes: u64,
    limits: DiskLimits,
    lower: Vec<PathBuf>,
    open: open_dirs::OpenDirs,
    /// Under a root server, the idmapping `dir` is a view through ([`owner`]).
    idmapped: Option<std::sync::Arc<owner::Idmapped>>,
}

impl WorkspaceRoot {
    /// Creates `root` (and missing parents) with mode 0700 if absent and opens it. An existing
    /// directory keeps its mode.
    pub fn new(root: impl Into<PathBuf>) -> Result<WorkspaceRoot, WorkspaceError> {
        let host = root.into();
        let root_io = |op, err| WorkspaceError::Io {
            path: "workspace root".to_owned(),
            op,
            kind: io::Error::kind(&err),
            source: err,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&host)
            .map_err(|e| root_io("create", e))?;
        let dir = Dir::open_ambient_dir(&host, cap_std::ambient_authority())
            .map_err(|e| root_io("open", e))?;
        Ok(WorkspaceRoot {
            host,
            dir,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            limits: DiskLimits::default(),
            lower: Vec::new(),
            open: open_dirs::OpenDirs::new(DEFAULT_OPEN_DIRS),
            idmapped: None,
        })
    }

    /// Under a root server (`owner` is `Some`), hands the root to the owner's user and reopens
    /// it through an idmapped view, so every file written under it, by this process or by a
    /// jail, belongs to that user on the host ([`owner`]).
    pub fn with_host_owner(
        mut self,
        owner: Option<std::sync::Arc<HostOwner>>,
    ) -> Result<Self, WorkspaceError> {
        let Some(owner) = owner else {
            return Ok(self);
        };
        let root_io = |op, err: io::Error| WorkspaceError::Io {
            path: "workspace root".to_owned(),
            op,
            kind: err.kind(),
            source: err,
        };
        owner.adopt(&self.host).map_err(|e| root_io("adopt", e))?;
        use std::os::fd::AsFd as _;
        let view = owner
            .view(self.dir.as_fd())
            .map_err(|e| root_io("idmap", e))?;
        self.dir = Dir::from_std_file(fs::File::from(view));
        let idmapped = owner::Idmapped::new(owner, &self.host).map_err(|e| root_io("stage", e))?;
        self.idmapped = Some(std::sync::Arc::new(idmapped));
        Ok(self)
    }

    /// The owner of this root's files under a root server (the user jails write as).
    pub fn host_owner(&self) -> Option<std::sync::Arc<HostOwner>> {
        self.idmapped.as_ref().map(|i| i.owner.clone())
    }

    /// Adds read-only lower layers, nearest first: the workspace roots of less isolated
    /// instances of the same server. A session sees its files there (the ones it wrote before
    /// it moved up) wherever this root has none by that name; it never writes there. A layer
    /// or session folder that does not exist is skipped.
    ///
    /// This is the one home of the per-mode data rule inside a process: an instance writes only
    /// its own root, and is only ever given the roots of *less* isolated instances.
    pub fn with_lower(mut self, lower: Vec<PathBuf>) -> Self {
        self.lower = lower;
        self
    }

    /// Sets the largest file size that [`SessionWorkspace::read`] returns for sessions opened after
    /// this call.
    pub fn with_max_read_bytes(mut self, limit: u64) -> Self {
        self.max_read_bytes = limit;
        self
    }

    /// Sets the disk limits of sessions opened after this call.
    pub fn with_limits(mut self, limits: DiskLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Holds at most `max` session directories open between calls (`workspace.open_dirs`; 0:
    /// every call opens its session's path). See `open_dirs` for what a held handle may serve.
    pub fn with_open_dirs(mut self, max: usize) -> Self {
        self.open = open_dirs::OpenDirs::new(max);
        self
    }

    /// Session directories held open now (at most `workspace.open_dirs`).
    pub fn open_dirs(&self) -> usize {
        self.open.len()
    }

    /// The host path of the root (for operators and logs; never show it to agents).
    pub fn host_path(&self) -> &Path {
        &self.host
    }

    /// Opens the caller's session directory `<root>/<user>/<session>`, creating each level with
    /// mode 0700 through the root capability. Each level is opened with `O_NOFOLLOW`, so a symlink
    /// planted at `<root>/<user>` or `<root>/<user>/<session>` is refused rather than followed.
    /// The session's own directory comes from the open handles when one may serve (`open_dirs`);
    /// lower layers are looked up on every call, so one made later is seen at once.
    pub fn session(&self, id: &Identity) -> Result<SessionWorkspace, WorkspaceError> {
        let session = self.open.get(id.user(), id.session(), || {
            let user = open_child_dir(&self.dir, id.user())?;
            open_child_dir(&user, id.session())
        })?;
        let lower = self
            .lower
            .iter()
            .filter_map(|root| open_existing_session(root, id))
            .collect();
        Ok(SessionWorkspace::new(
            session,
            id.clone(),
            self.host.join(id.user()).join(id.session()),
            self.max_read_bytes,
            self.limits,
        )
        .with_lower(lower)
        .with_idmapped(self.idmapped.clone()))
    }
}

/// Opens `<root>/<user>/<session>` of a lower layer if it exists, without following a symlink
/// at either level and without creating anything.
fn open_existing_session(root: &Path, id: &Identity) -> Option<Dir> {
    let root = Dir::open_ambient_dir(root, cap_std::ambient_authority()).ok()?;
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags((OFlags::DIRECTORY | OFlags::NOFOLLOW).bits() as i32);
    let user = Dir::from_std_file(root.open_with(id.user(), &opts).ok()?.into_std());
    let session = user.open_with(id.session(), &opts).ok()?;
    Some(Dir::from_std_file(session.into_std()))
}

/// Opens `name` (one validated component) beneath `parent` without following a symlink,
/// creating it first if it is absent. An existing directory (every call after a session's first)
/// is opened without trying to create it.
fn open_child_dir(parent: &Dir, name: &str) -> Result<Dir, WorkspaceError> {
    let at = |op, err: io::Error| WorkspaceError::Io {
        path: "session directory".to_owned(),
        op,
        kind: err.kind(),
        source: err,
    };
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags((OFlags::DIRECTORY | OFlags::NOFOLLOW).bits() as i32);
    match parent.open_with(name, &opts) {
        Ok(file) => return Ok(Dir::from_std_file(file.into_std())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(at("open", e)),
    }
    let mut builder = DirBuilder::new();
    builder.mode(DIR_MODE);
    match parent.create_dir_with(name, &builder) {
        Ok(()) => {}
        // Another call made it meanwhile.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(at("create", e)),
    }
    let file = parent.open_with(name, &opts).map_err(|e| at("open", e))?;
    Ok(Dir::from_std_file(file.into_std()))
}
