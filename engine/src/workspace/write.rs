//! Writing into a session: atomic replace (temp file + rename), append, and streaming create.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt as _, OpenOptions, OpenOptionsExt as _};
use rustix::fs::OFlags;

use super::path::{RelPath, agent_to_relative};
use super::session::checked_regular;
use super::{DIR_MODE, SessionWorkspace, TEMP_PREFIX, WorkspaceError};

/// Mode of every file the workspace creates.
pub(super) const FILE_MODE: u32 = 0o600;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl SessionWorkspace {
    /// Replaces the file at `agent_path` with `bytes` atomically: readers see the old or the new
    /// content, never a mix. Missing parent directories are created (0700), the file is 0600.
    /// Writing over a symlink replaces the symlink itself, never its target. Atomic against
    /// concurrent readers, not crash-durable (no fsync).
    pub fn write(&self, agent_path: &str, bytes: impl AsRef<[u8]>) -> Result<(), WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        let agent = rel.to_agent_path();
        let existing = self.dir.symlink_metadata(rel.fs_path()).ok();
        self.admit(
            bytes.as_ref().len() as u64,
            existing
                .as_ref()
                .filter(|m| m.is_file())
                .map_or(0, |m| m.len()),
            existing.is_none(),
        )?;
        let (parent, name) = self.parent_dir(&rel)?;
        let io = |op, e| WorkspaceError::from_io(&agent, op, e);
        let tmp = format!(
            "{TEMP_PREFIX}{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true).mode(FILE_MODE);
        let mut file = parent.open_with(&tmp, &opts).map_err(|e| io("write", e))?;
        let written = file.write_all(bytes.as_ref()).map_err(|e| io("write", e));
        drop(file);
        let renamed = written.and_then(|()| {
            parent
                .rename(&tmp, &parent, name)
                .map_err(|e| io("rename", e))
        });
        if renamed.is_err() {
            let _ = parent.remove_file(&tmp);
        }
        renamed
    }

    /// Appends `bytes` to the file at `agent_path`, creating it (and parents) if absent.
    pub fn append(&self, agent_path: &str, bytes: impl AsRef<[u8]>) -> Result<(), WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        let exists = self.dir.symlink_metadata(rel.fs_path()).is_ok();
        self.admit(bytes.as_ref().len() as u64, 0, !exists)?;
        let mut opts = OpenOptions::new();
        opts.append(true);
        let mut file = self.open_for_write(&rel, &opts)?;
        file.write_all(bytes.as_ref())
            .map_err(|e| WorkspaceError::from_io(&rel.to_agent_path(), "append", e))
    }

    /// Creates or truncates the file at `agent_path` (and its parents) and returns it for
    /// streaming writes.
    pub fn create(&self, agent_path: &str) -> Result<std::fs::File, WorkspaceError> {
        let rel = agent_to_relative(agent_path)?;
        let mut opts = OpenOptions::new();
        opts.write(true);
        let file = self.open_for_write(&rel, &opts)?;
        // Truncate only after the descriptor passed the regular-file and link-count checks.
        file.set_len(0)
            .map_err(|e| WorkspaceError::from_io(&rel.to_agent_path(), "create", e))?;
        Ok(file)
    }

    /// Creates `rel`'s parent directories beneath the session and opens `rel` with `opts` plus
    /// create, mode 0600 and `O_NONBLOCK` (checked to be a single-link regular file).
    fn open_for_write(
        &self,
        rel: &RelPath,
        opts: &OpenOptions,
    ) -> Result<std::fs::File, WorkspaceError> {
        let agent = rel.to_agent_path();
        self.parent_dir(rel)?;
        let mut opts = opts.clone();
        opts.create(true)
            .mode(FILE_MODE)
            .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
        let file = self
            .dir
            .open_with(rel.fs_path(), &opts)
            .map_err(|e| WorkspaceError::from_io(&agent, "open", e))?;
        checked_regular(file, &agent)
    }

    /// Creates the parent of `rel` beneath the session (mode 0700) and opens it; returns it with
    /// the last component. The root itself is not a file name.
    pub(super) fn parent_dir<'a>(
        &self,
        rel: &'a RelPath,
    ) -> Result<(Dir, &'a str), WorkspaceError> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(WorkspaceError::Invalid {
                reason: "path names the workspace root, not a file".to_owned(),
            });
        };
        let agent = parent.to_agent_path();
        let io = |e| WorkspaceError::from_io(&agent, "create directory", e);
        if parent.is_root() {
            return Ok((self.dir.try_clone().map_err(io)?, name));
        }
        let mut builder = DirBuilder::new();
        builder.recursive(true).mode(DIR_MODE);
        match self.dir.create_dir_with(parent.fs_path(), &builder) {
            Ok(()) => {}
            // An existing entry may be a symlink: opening it below gives the precise error.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        let dir = self.dir.open_dir(parent.fs_path()).map_err(io)?;
        Ok((dir, name))
    }
}
