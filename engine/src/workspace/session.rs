//! One session's workspace: reading, listing and removing, all through the session's cap-std `Dir`.

use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt as _};
use rustix::fs::OFlags;

use super::path::{RelPath, agent_to_relative};
use super::{WorkspaceError, is_temp_name};
use crate::identity::Identity;

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntryInfo {
    /// The file name (one component).
    pub name: String,
    /// Whether it is a directory (a symlink counts as what it points to, if that is inside).
    pub is_dir: bool,
    /// Size in bytes (0 for directories).
    pub size: u64,
}

/// A session's workspace directory, held open as a capability. Every operation takes an agent
/// path and resolves it beneath this directory; nothing here ever builds an ambient host path.
#[derive(Debug)]
pub struct SessionWorkspace {
    pub(super) dir: std::sync::Arc<Dir>,
    identity: Identity,
    host: PathBuf,
    max_read_bytes: u64,
    pub(super) limits: super::DiskLimits,
    /// Read-only lower layers, nearest first (see `WorkspaceRoot::with_lower`).
    pub(super) lower: Vec<Dir>,
    /// Under a root server, the idmapping `dir` is seen through (a jail's bind is a clone).
    idmapped: Option<std::sync::Arc<super::owner::Idmapped>>,
}

impl SessionWorkspace {
    pub(super) fn new(
        dir: std::sync::Arc<Dir>,
        identity: Identity,
        host: PathBuf,
        max_read_bytes: u64,
        limits: super::DiskLimits,
    ) -> Self {
        SessionWorkspace {
            dir,
            identity,
            host,
            max_read_bytes,
            limits,
            lower: Vec::new(),
            idmapped: None,
        }
    }

    pub(super) fn with_lower(mut self, lower: Vec<Dir>) -> Self {
        self.lower = lower;
        self
    }

    pub(super) fn with_idmapped(
        mut self,
        idmapped: Option<std::sync::Arc<super::owner::Idmapped>>,
    ) -> Self {
        self.idmapped = idmapped;
        self
    }

    /// Whether `rel` exists in this session's own layer (not following a final symlink).
    fn in_own_layer(&self, rel: &RelPath) -> bool {
        rel.is_root() || self.dir.symlink_metadata(rel.fs_path()).is_ok()
    }

    /// Whose workspace this is.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The session's folder in this instance's layer, as an open directory.
    pub fn dir_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd as _;
        self.dir.as_fd()
    }

    /// What a jail mounts at `/workspace`: the open folder itself (bound by descriptor, so no
    /// path is looked up again), or under a root server a clone of its idmapped view, which
    /// the jail attaches over the root's stage folder in a mount namespace of its own first (a
    /// detached mount cannot be bound by descriptor).
    pub fn jail_bind(&self) -> std::io::Result<crate::jail::WorkspaceBind<'_>> {
        use std::os::fd::AsFd as _;
        let Some(idmapped) = &self.idmapped else {
            return Ok(crate::jail::WorkspaceBind::Open(self.dir.as_fd()));
        };
        // Cloning part of a detached view needs Linux 6.15; before, the same folder by its
        // host path (made by this process, not by a jail) gets a view of its own.
        let tree = match super::owner::clone_tree(self.dir.as_fd()) {
            Ok(tree) => tree,
            Err(_) => {
                let plain = std::fs::File::open(&self.host)?;
                idmapped.owner.view(plain.as_fd())?
            }
        };
        Ok(crate::jail::WorkspaceBind::Staged {
            tree,
            at: idmapped.stage.clone(),
        })
    }

    /// The host directory (for operators and logs; never show it to agents, never open by it).
    pub fn host_path(&self) -> &Path {
        &self.host
    }

    /// The largest file [`read`](Self::read) returns, in bytes.
    pub fn max_read_bytes(&self) -> u64 {
        self.max_read_bytes
    }

    /// The agent form of a relative path: `/workspace/<rel>`.
    pub fn to_agent_path(&self, rel: &RelPath) -> String {
        rel.to_agent_path()
    }

    /// Reads a whole file, refusing files above the read limit with [`WorkspaceError::TooLarge`].
    pub fn read(&self, agent_path: &str) -> Result<Vec<u8>, WorkspaceError> {
        let (rel, file, size) = self.open_regular(agent_path)?;
        let agent = rel.to_agent_path();
        let limit = self.max_read_bytes;
        if size > limit {
            return Err(WorkspaceError::TooLarge {
                path: agent,
                size,
                limit,
            });
        }
        let buf = read_sized(&file, size, limit)
            .map_err(|e| WorkspaceError::from_io(&agent, "read", e))?;
        if buf.len() as u64 > limit {
            return Err(WorkspaceError::TooLarge {
                path: agent,
                size: buf.len() as u64,
                limit,
            });
        }
        Ok(buf)
    }

    /// Reads a whole UTF-8 file (same limit as [`read`](Self::read)).
    pub fn read_to_string(&self, agent_path: &str) -> Result<String, WorkspaceError> {
        let bytes = self.read(agent_path)?;
        String::from_utf8(bytes).map_err(|_| WorkspaceError::WrongType {
            path: agent_to_relative(agent_path)
                .map(|r| r.to_agent_path())
                .unwrap_or_default(),
            reason: "file is not valid UTF-8",
        })
    }

    /// Opens a regular file for reading (streaming; no size limit).
    pub fn open(&self, agent_path: &str) -> Result<std::fs::File, WorkspaceError> {
        let (rel, file, _) = self.open_regular(agent_path)?;
        blocking(file, &rel.to_agent_path())
    }

    /// Lists a directory, sorted by name. Symlinks are reported as what they point to when that
    /// resolves inside the workspace, otherwise as a non-directory of size 0.
    /// With lower layers, names from a lower layer that this one does not have are added.
    pub fn list(&self, agent_path: &str) -> Result<Vec<DirEntryInfo>, WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        let mut out = match list_layer(&self.dir, &rel) {
            Ok(entries) => entries,
            Err(e) if self.lower.is_empty() || !matches!(e, WorkspaceError::NotFound { .. }) => {
                return Err(e);
            }
            Err(_) => Vec::new(),
        };
        let mut found = self.in_own_layer(&rel);
        for layer in &self.lower {
            if let Ok(entries) = list_layer(layer, &rel) {
                found = true;
                for e in entries {
                    if !out.iter().any(|o| o.name == e.name) {
                        out.push(e);
                    }
                }
            }
        }
        if !found {
            return Err(WorkspaceError::NotFound {
                path: rel.to_agent_path(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// Lists `rel` in one layer (see [`SessionWorkspace::list`]).
fn list_layer(dir: &Dir, rel: &RelPath) -> Result<Vec<DirEntryInfo>, WorkspaceError> {
    let agent = rel.to_agent_path();
    let io = |e| WorkspaceError::from_io(&agent, "list", e);
    let sub = if rel.is_root() {
        dir.try_clone().map_err(io)?
    } else {
        dir.open_dir(rel.fs_path()).map_err(io)?
    };
    let mut out = Vec::new();
    for entry in sub.entries().map_err(io)? {
        let entry = entry.map_err(io)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue; // names that are not UTF-8 cannot be addressed by agents
        };
        if is_temp_name(&name) {
            continue;
        }
        // A symlink is resolved from the session root (not from `sub`) so that a relative
        // link like `../x` that stays inside the session still resolves.
        let meta = match entry.file_type() {
            Ok(t) if t.is_symlink() => rel
                .join(&name)
                .ok()
                .and_then(|child| dir.metadata(child.fs_path()).ok()),
            Ok(_) => entry.metadata().ok(),
            Err(_) => None,
        };
        let (is_dir, size) = match meta {
            Some(m) if m.is_dir() => (true, 0),
            Some(m) if m.is_file() => (false, m.len()),
            _ => (false, 0),
        };
        out.push(DirEntryInfo { name, is_dir, size });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

impl SessionWorkspace {
    /// Removes a file, a symlink (not its target) or a directory tree. The root cannot be removed.
    pub fn remove(&self, agent_path: &str) -> Result<(), WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        if rel.is_root() {
            return Err(WorkspaceError::Invalid {
                reason: "the workspace root cannot be removed".to_owned(),
            });
        }
        let agent = rel.to_agent_path();
        if !self.in_own_layer(&rel) && self.lower_has(&rel) {
            return Err(WorkspaceError::Invalid {
                reason: format!(
                    "{agent} was written before this session moved to a more isolated instance and is read-only here"
                ),
            });
        }
        let io = |e| WorkspaceError::from_io(&agent, "remove", e);
        let meta = self.dir.symlink_metadata(rel.fs_path()).map_err(io)?;
        if meta.is_dir() {
            self.dir.remove_dir_all(rel.fs_path()).map_err(io)
        } else {
            self.dir.remove_file(rel.fs_path()).map_err(io)
        }
    }

    /// Whether something exists at the path (following symlinks that stay inside). A symlink that
    /// points outside is [`WorkspaceError::Escape`], not `false`.
    pub fn exists(&self, agent_path: &str) -> Result<bool, WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        let agent = rel.to_agent_path();
        let own = self
            .dir
            .try_exists(rel.fs_path())
            .map_err(|e| WorkspaceError::from_io(&agent, "stat", e))?;
        Ok(own || self.lower_has(&rel))
    }

    /// Whether a lower layer has something at `rel` (following symlinks that stay inside).
    fn lower_has(&self, rel: &RelPath) -> bool {
        self.lower
            .iter()
            .any(|l| l.try_exists(rel.fs_path()).unwrap_or(false))
    }

    /// Opens `agent_path` read-only as a regular file with a single link, checked on the open
    /// descriptor (no check-then-open window), with its size at the check. `O_NONBLOCK` keeps a
    /// planted FIFO from hanging us; the file keeps it (a regular file ignores it).
    fn open_regular(
        &self,
        agent_path: &str,
    ) -> Result<(RelPath, std::fs::File, u64), WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        let agent = rel.to_agent_path();
        let mut opts = OpenOptions::new();
        opts.read(true)
            .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
        let mut opened = self.dir.open_with(rel.fs_path(), &opts);
        if matches!(&opened, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            // Not in this layer: the nearest lower layer that has it (read-only by construction:
            // `opts` only reads).
            for layer in &self.lower {
                match layer.open_with(rel.fs_path(), &opts) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    other => {
                        opened = other;
                        break;
                    }
                }
            }
        }
        let file = opened.map_err(|e| WorkspaceError::from_io(&agent, "open", e))?;
        let (file, size) = regular(file, &agent)?;
        Ok((rel, file, size))
    }
}

/// Checks an open file is a regular file with one hard link and clears `O_NONBLOCK`, for a
/// descriptor handed on (a stream, a writer).
pub(super) fn checked_regular(file: File, agent: &str) -> Result<std::fs::File, WorkspaceError> {
    let (file, _) = regular(file, agent)?;
    blocking(file, agent)
}

/// Checks an open file is a regular file with one hard link (one `fstat` on the descriptor);
/// returns it, flags untouched, with its size at the check.
pub(super) fn regular(file: File, agent: &str) -> Result<(std::fs::File, u64), WorkspaceError> {
    let file = file.into_std();
    // `fstat`, not std's `metadata` (a `statx` of an empty path), for the three fields used.
    let meta =
        rustix::fs::fstat(&file).map_err(|e| WorkspaceError::from_io(agent, "stat", e.into()))?;
    let kind = rustix::fs::FileType::from_raw_mode(meta.st_mode);
    if kind == rustix::fs::FileType::Directory {
        return Err(WorkspaceError::WrongType {
            path: agent.to_owned(),
            reason: "is a directory",
        });
    }
    if kind != rustix::fs::FileType::RegularFile {
        return Err(WorkspaceError::WrongType {
            path: agent.to_owned(),
            reason: "is not a regular file",
        });
    }
    // A hard link shares its inode with a file that may live outside the session: refuse it.
    if meta.st_nlink > 1 {
        return Err(WorkspaceError::Escape {
            path: agent.to_owned(),
        });
    }
    Ok((file, meta.st_size as u64))
}

/// Reads a regular file whose size was `size` at its `fstat`, never more than `limit + 1` bytes
/// (the file may grow after the check; the caller refuses a result over `limit`).
///
/// A read of a regular file returns fewer bytes than asked only at its end (POSIX `read`), so a
/// file that did not change since the `fstat` takes one `read` into a buffer one byte larger
/// than it: the short count is its end, and no second `read` has to return 0 to say so. A file
/// that grew fills that byte and is read on until a `read` returns 0 or the limit is passed.
fn read_sized(file: &std::fs::File, size: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(size.min(limit).saturating_add(1) as usize);
    let n = loop {
        match rustix::io::read(file, rustix::buffer::spare_capacity(&mut buf)) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r?,
        }
    };
    if n == 0 || (buf.len() as u64 == size && buf.len() < buf.capacity()) {
        return Ok(buf);
    }
    // It grew, or shrank under us: on to its end or one byte past the limit.
    let rest = limit.saturating_add(1).saturating_sub(buf.len() as u64);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, rest), &mut buf)?;
    Ok(buf)
}

/// Clears `O_NONBLOCK` (set at open so a planted FIFO cannot hang us).
fn blocking(file: std::fs::File, agent: &str) -> Result<std::fs::File, WorkspaceError> {
    let flags = rustix::fs::fcntl_getfl(&file)
        .map_err(|e| WorkspaceError::from_io(agent, "open", e.into()))?;
    rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK)
        .map_err(|e| WorkspaceError::from_io(agent, "open", e.into()))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::read_sized;
    use std::io::Write as _;

    fn file_with(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        std::io::Seek::rewind(&mut f).unwrap();
        f
    }

    #[test]
    fn an_unchanged_file_is_read_whole() {
        for len in [0usize, 1, 14, 4096, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let got = read_sized(&file_with(&data), len as u64, 1 << 20).unwrap();
            assert_eq!(got, data, "{len} bytes");
        }
    }

    /// The `fstat` saw fewer bytes than the file has by the read: everything is read, up to one
    /// byte past the limit (so the caller can tell it went over).
    #[test]
    fn a_file_that_grew_after_its_fstat_is_read_on_to_the_limit() {
        let data = vec![7u8; 10_000];
        let got = read_sized(&file_with(&data), 14, 1 << 20).unwrap();
        assert_eq!(got.len(), 10_000);
        let got = read_sized(&file_with(&data), 14, 5_000).unwrap();
        assert_eq!(got.len(), 5_001, "stops one byte past the limit");
        let got = read_sized(&file_with(&data), 0, 1 << 20).unwrap();
        assert_eq!(got.len(), 10_000, "grew from empty");
    }

    /// The file shrank after its `fstat`: the short read is not taken for the old size.
    #[test]
    fn a_file_that_shrank_after_its_fstat_is_read_as_it_is() {
        let got = read_sized(&file_with(b"short"), 14, 1 << 20).unwrap();
        assert_eq!(got, b"short");
    }
}
