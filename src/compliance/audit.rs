//! The append-only JSON-lines audit log of call decisions, safe to share between threads and
//! processes: each record is one `write` of a whole line to an `O_APPEND` file under a lock.

use crate::identity::Identity;
use crate::policy::{Permission, Sensitivity};
use serde::{Deserialize, Serialize};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What the runtime decided for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The call ran and the session's level did not change.
    Allowed,
    /// The call was refused by policy.
    Blocked,
    /// The call ran and raised the session's level.
    Escalated,
    /// The decision could not be made or recorded (the call is refused).
    Error,
}

/// One line of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the decision was made, RFC 3339 UTC.
    pub ts: String,
    /// The caller's user id.
    pub user: String,
    /// The caller's session id.
    pub session: String,
    /// The tool's name.
    pub tool: String,
    /// The tool's declared permission.
    pub permission: Permission,
    /// The session's level before the call.
    pub level_before: Sensitivity,
    /// The session's level after the call.
    pub level_after: Sensitivity,
    /// The decision.
    pub outcome: Outcome,
    /// Why, when there is more to say (the block reason, the error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl AuditRecord {
    /// A record stamped with the current time.
    pub fn now(
        id: &Identity,
        tool: &str,
        permission: Permission,
        level_before: Sensitivity,
        level_after: Sensitivity,
        outcome: Outcome,
        detail: Option<String>,
    ) -> AuditRecord {
        AuditRecord {
            ts: super::now_rfc3339(),
            user: id.user().to_owned(),
            session: id.session().to_owned(),
            tool: tool.to_owned(),
            permission,
            level_before,
            level_after,
            outcome,
            detail,
        }
    }
}

/// Why an audit record could not be written. Callers should refuse the call rather than run
/// it unaudited.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Opening, locking or writing the log failed.
    #[error("audit log {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The record could not be serialised.
    #[error("audit record cannot be serialised: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// An open audit log. `Send + Sync`; one file handle, appends serialised by a mutex within the
/// process and by an exclusive file lock across processes.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl AuditLog {
    /// Opens (or creates: directory 0700, file 0600) the log at `path` for appending.
    pub fn open(path: &Path) -> Result<AuditLog, AuditError> {
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io)?;
        }
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc_o_nofollow())
            .open(path)
            .map_err(io)?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one JSON line.
    pub fn append(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let io = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        file.lock().map_err(io)?;
        // `write_all` on an O_APPEND regular file is a single write for a line this size; the
        // lock keeps even a short write's continuation contiguous.
        let written = (&*file).write_all(&line);
        let unlocked = file.unlock();
        written.map_err(io)?;
        unlocked.map_err(io)
    }
}

/// `O_NOFOLLOW` from rustix, so a planted symlink at the log path is refused.
fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> AuditRecord {
        let id = Identity::new("alice", "s1").unwrap();
        AuditRecord::now(
            &id,
            &format!("tool{n}"),
            Permission::Connect,
            Sensitivity::Internal,
            Sensitivity::Secret,
            Outcome::Escalated,
            Some("x".repeat(n % 50)),
        )
    }

    #[test]
    fn record_serialises_with_lowercase_enums_and_utc_time() {
        let v = serde_json::to_value(sample(1)).unwrap();
        assert_eq!(v["permission"], "connect");
        assert_eq!(v["level_before"], "internal");
        assert_eq!(v["outcome"], "escalated");
        let ts = v["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 24, "{ts}");
        let shape: String = ts
            .chars()
            .map(|c| if c.is_ascii_digit() { 'd' } else { c })
            .collect();
        assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.dddZ");
    }

    #[test]
    fn symlinked_log_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "").unwrap();
        let link = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(AuditLog::open(&link).is_err());
    }
}
