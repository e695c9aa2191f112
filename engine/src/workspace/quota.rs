//! Disk limits of one session's workspace, enforced before anything is written: total bytes and
//! files (across the session's layers, so moving up never multiplies them), a free-space floor on the file system (so an agent can never fill the disk the state
//! store and the audit log live on), a cap per saved result, and a budget for saved results in
//! which the oldest make room for the newest.

use std::io;

use cap_std::fs::Dir;

use super::{SessionWorkspace, WorkspaceError};

/// The limits (`workspace:` in config.yaml).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskLimits {
    /// Bytes all files of one session may hold.
    pub max_bytes: u64,
    /// Files one session may hold.
    pub max_files: u64,
    /// Bytes of one saved result (a longer one is cut there).
    pub max_result_bytes: u64,
    /// Bytes all saved results of one session may hold.
    pub results_max_bytes: u64,
    /// Saved results one session keeps.
    pub results_max_files: u64,
    /// Free bytes the file system must keep.
    pub min_free_bytes: u64,
}

impl Default for DiskLimits {
    fn default() -> Self {
        DiskLimits {
            max_bytes: 256 << 20,
            max_files: 2_000,
            max_result_bytes: 32 << 20,
            results_max_bytes: 128 << 20,
            results_max_files: 100,
            min_free_bytes: 64 << 20,
        }
    }
}

/// What a session's files use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of regular files.
    pub bytes: u64,
    /// Regular files.
    pub files: u64,
}

impl SessionWorkspace {
    /// The session's current usage across its layers: this instance's and the read-only lower
    /// ones (a session that moved up holds all of them; a shadowed lower file still counts, so
    /// the sum never understates). Walks each tree; symlinks are not followed.
    pub fn usage(&self) -> Result<Usage, WorkspaceError> {
        let mut u = Usage::default();
        for dir in std::iter::once(&*self.dir).chain(self.lower.iter()) {
            walk(dir, &mut u, 0)
                .map_err(|e| WorkspaceError::from_io("/workspace", "measure", e))?;
        }
        Ok(u)
    }

    /// Free bytes on the workspace's file system (for unprivileged writers), if known.
    pub fn free_bytes(&self) -> Option<u64> {
        rustix::fs::fstatvfs(&self.dir)
            .ok()
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
    }

    /// Refuses a write that adds `adding` bytes in place of `replacing` bytes (and one file when
    /// `new_file`) if it would pass a limit; says which.
    pub(super) fn admit(
        &self,
        adding: u64,
        replacing: u64,
        new_file: bool,
    ) -> Result<(), WorkspaceError> {
        let limits = self.limits;
        if let Some(free) = self.free_bytes()
            && free.saturating_sub(adding) < limits.min_free_bytes
        {
            return Err(WorkspaceError::Quota {
                limit: "workspace.min_free_bytes",
                detail: "the server's disk is nearly full; writes are refused until space is freed"
                    .into(),
                retryable: false,
            });
        }
        let used = self.usage()?;
        let after = used.bytes.saturating_sub(replacing).saturating_add(adding);
        if after > limits.max_bytes {
            return Err(WorkspaceError::Quota {
                limit: "workspace.max_bytes",
                detail: format!(
                    "this session's files would use {after} bytes, over its {} byte limit (now {} bytes); write less or overwrite an existing file",
                    limits.max_bytes, used.bytes
                ),
                retryable: true,
            });
        }
        if new_file && used.files >= limits.max_files {
            return Err(WorkspaceError::Quota {
                limit: "workspace.max_files",
                detail: format!(
                    "this session holds {} files, its limit; overwrite an existing file instead",
                    used.files
                ),
                retryable: true,
            });
        }
        Ok(())
    }

    /// Refuses when the session's files are already past a limit (for a writer this process
    /// does not see each write of, such as a session's upstream MCP server); says which.
    pub fn admit_nothing_more(&self) -> Result<(), WorkspaceError> {
        self.admit(0, 0, false)
    }

    /// The limits this workspace enforces.
    pub fn limits(&self) -> DiskLimits {
        self.limits
    }
}

/// Adds up regular files beneath `dir` (depth-bounded; entries that vanish are skipped).
fn walk(dir: &Dir, u: &mut Usage, depth: usize) -> io::Result<()> {
    if depth > 64 {
        return Ok(());
    }
    for entry in dir.entries()? {
        let Ok(entry) = entry else { continue };
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_file() {
            if let Ok(m) = entry.metadata() {
                u.bytes = u.bytes.saturating_add(m.len());
                u.files += 1;
            }
        } else if ft.is_dir()
            && let Ok(sub) = entry.open_dir()
        {
            walk(&sub, u, depth + 1)?;
        }
    }
    Ok(())
}
