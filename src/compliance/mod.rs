//! The sensitivity ratchet: per (user, session) state that only ever rises, kept in SQLite
//! outside every workspace, plus the JSON-lines audit log of every call decision.
//!
//! Every reader must fail closed: an error reading the state means [`Sensitivity::Secret`]
//! (see [`ComplianceStore::level_fail_closed`]).

mod audit;
mod epoch;
mod store;

pub use audit::{AuditError, AuditLog, AuditRecord, Outcome};
pub use store::{ComplianceStore, DatasetRecord, MAX_DATASET_LEN, SCHEMA_VERSION, SessionRecord};

use crate::policy::Sensitivity;
use std::path::PathBuf;

/// Why the compliance state could not be read or written. Callers treat every variant as
/// [`Sensitivity::Secret`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ComplianceError {
    /// The store cannot be reached right now (locked past the busy timeout, cannot be opened).
    #[error("compliance store {} is unavailable: {detail}", .path.display())]
    Unavailable { path: PathBuf, detail: String },
    /// The file is not a valid compliance store (garbage, truncated, malformed rows).
    #[error("compliance store {} is corrupt: {detail}", .path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// The file is a SQLite database but not one this version understands.
    #[error("compliance store {} has schema {found}, expected {expected}", .path.display())]
    SchemaMismatch {
        path: PathBuf,
        found: String,
        expected: String,
    },
    /// The operating system refused an operation on the store's file or directory.
    #[error("compliance store {}: {detail}", .path.display())]
    Io {
        path: PathBuf,
        kind: std::io::ErrorKind,
        detail: String,
    },
    /// A dataset name that cannot be recorded (empty, too long, control characters).
    #[error("invalid dataset name {name:?}: {reason}")]
    InvalidDataset { name: String, reason: &'static str },
}

impl ComplianceError {
    /// The level a caller must assume when this error occurs: always [`Sensitivity::Secret`].
    pub fn fail_closed_level(&self) -> Sensitivity {
        Sensitivity::Secret
    }
}

/// The current time as RFC 3339 UTC with millisecond precision, e.g. `2026-11-22T14:30:00.123Z`.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let ms = now.millisecond();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}
