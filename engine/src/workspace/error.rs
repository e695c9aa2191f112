//! Typed workspace errors whose messages name only agent paths (`/workspace/...`), never host paths.

use std::io;

use crate::errors::ToolError;

/// Why a workspace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The agent path is malformed (absolute outside `/workspace`, `..`, NUL, too long, ...).
    #[error("invalid workspace path: {reason}")]
    Invalid {
        /// What is wrong, for the model.
        reason: String,
    },
    /// Nothing exists at the path.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The agent path.
        path: String,
    },
    /// Confinement refused the path: resolving it would leave the session directory (a symlink
    /// pointing out, an absolute symlink, a file hard-linked from elsewhere).
    #[error("{path}: refused, the path resolves outside the workspace")]
    Escape {
        /// The agent path.
        path: String,
    },
    /// The file is larger than the read limit.
    #[error("{path}: file is {size} bytes, above the {limit}-byte read limit")]
    TooLarge {
        /// The agent path.
        path: String,
        /// The file size in bytes.
        size: u64,
        /// The configured limit in bytes.
        limit: u64,
    },
    /// The path exists but has the wrong type for the operation (a directory where a file was
    /// expected, a non-regular file, a non-empty directory, ...).
    #[error("{path}: {reason}")]
    WrongType {
        /// The agent path.
        path: String,
        /// What is wrong, for the model.
        reason: &'static str,
    },
    /// A disk limit refused the write (`limit` is the config key that sets it).
    #[error("{detail} ({limit})")]
    Quota {
        /// The configuration key of the limit.
        limit: &'static str,
        /// What happened and what the model can do.
        detail: String,
        /// Whether writing less could succeed.
        retryable: bool,
    },
    /// Any other I/O failure (disk full, permissions on the host, ...).
    #[error("{path}: {op} failed: {kind}")]
    Io {
        /// The agent path.
        path: String,
        /// The operation, e.g. `read`.
        op: &'static str,
        /// The error kind (the message of an OS error never carries a path).
        kind: io::ErrorKind,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl WorkspaceError {
    /// Whether the model can fix the call (another path, a smaller file); false for escapes and
    /// infrastructure failures.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            WorkspaceError::Invalid { .. }
                | WorkspaceError::NotFound { .. }
                | WorkspaceError::TooLarge { .. }
                | WorkspaceError::WrongType { .. }
                | WorkspaceError::Quota {
                    retryable: true,
                    ..
                }
        )
    }

    /// Maps an I/O error from a confined operation on `path` (an agent path).
    pub(crate) fn from_io(path: &str, op: &'static str, err: io::Error) -> Self {
        let path = path.to_owned();
        // cap-std reports an escape (openat2 EXDEV or its own resolver) as a PermissionDenied
        // error without an OS code; a real EACCES carries errno 13.
        if err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none() {
            return WorkspaceError::Escape { path };
        }
        if err.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) {
            return WorkspaceError::Escape { path };
        }
        let wrong = |reason| WorkspaceError::WrongType {
            path: path.clone(),
            reason,
        };
        match err.kind() {
            io::ErrorKind::NotFound => WorkspaceError::NotFound { path },
            io::ErrorKind::IsADirectory => wrong("is a directory"),
            io::ErrorKind::NotADirectory => wrong("a component of the path is not a directory"),
            io::ErrorKind::DirectoryNotEmpty => wrong("directory is not empty"),
            io::ErrorKind::AlreadyExists => wrong("already exists"),
            _ if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                wrong("too many levels of symbolic links")
            }
            kind => WorkspaceError::Io {
                path,
                op,
                kind,
                source: err,
            },
        }
    }
}

impl From<WorkspaceError> for ToolError {
    fn from(err: WorkspaceError) -> Self {
        if err.is_retryable() {
            ToolError::retry(err)
        } else {
            ToolError::fatal(err)
        }
    }
}
