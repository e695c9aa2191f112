//! Why session state could not be read or written. Every error means the caller fails closed:
//! the session is treated as `secret` and the call is refused.

use crate::policy::Sensitivity;

/// The class of a state error; it decides the text the model sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateErrorKind {
    /// The store cannot be reached right now (locked, connection refused, disk full).
    Unavailable,
    /// The store's data is damaged or inconsistent (garbage, out-of-range level, rolled back).
    Corrupt,
    /// A file or table is not the one opened, or not of this store (deleted, replaced, foreign).
    Tampered,
    /// The store does not exist and may not be created implicitly.
    Missing,
    /// The store is of another schema version.
    Schema,
    /// The session's lock was held longer than the lock timeout.
    Busy,
    /// A dataset name that cannot be recorded.
    InvalidDataset,
    /// A defect in the caller (an API misuse).
    Bug,
}

/// A state error: a kind for the model and a detail (with paths) for the operator's log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct StateError {
    kind: StateErrorKind,
    detail: String,
}

impl StateError {
    /// An error of `kind`; `detail` goes to logs only.
    pub fn new(kind: StateErrorKind, detail: impl Into<String>) -> StateError {
        StateError {
            kind,
            detail: detail.into(),
        }
    }

    /// The class of the error.
    pub fn kind(&self) -> StateErrorKind {
        self.kind
    }

    /// The operator's detail (may name host paths; never sent to a client).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// What the model may read: what happened and what it can do, without host paths.
    pub fn for_model(&self) -> &'static str {
        match self.kind {
            StateErrorKind::Unavailable => "the compliance store is unavailable",
            StateErrorKind::Corrupt => "the compliance store is damaged",
            StateErrorKind::Tampered => {
                "the compliance store's files changed under this instance; it must be restarted"
            }
            StateErrorKind::Missing => "the compliance store is missing",
            StateErrorKind::Schema => "the compliance store has another schema version",
            StateErrorKind::Busy => {
                "this session is busy in another call that changes its sensitivity; retry shortly"
            }
            StateErrorKind::InvalidDataset => "the dataset name cannot be recorded",
            StateErrorKind::Bug => "internal error in the compliance layer",
        }
    }

    /// The level a caller must assume when this error occurs: always [`Sensitivity::Secret`].
    pub fn fail_closed_level(&self) -> Sensitivity {
        Sensitivity::Secret
    }

    pub(crate) fn io(
        kind: StateErrorKind,
        what: &std::path::Path,
        e: impl std::fmt::Display,
    ) -> Self {
        StateError::new(kind, format!("{}: {e}", what.display()))
    }
}
