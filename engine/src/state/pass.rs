//! A call's hold on its session: while a [`Pass`] lives, no process can raise the session's level.

use super::Hold;
use crate::identity::Identity;
use crate::policy::Sensitivity;

/// How a pass holds its session's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassMode {
    /// Many calls of the session may run; none may escalate.
    Shared,
    /// This call alone; it may escalate.
    Exclusive,
}

/// A call's hold on its session's lock, with the level read under it. The level is the one every
/// admission decision of the call must use.
pub struct Pass {
    id: Identity,
    level: Sensitivity,
    mode: PassMode,
    pub(crate) hold: Hold,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass")
            .field("session", &self.id)
            .field("level", &self.level)
            .field("mode", &self.mode)
            .finish()
    }
}

impl Pass {
    pub(crate) fn new(id: Identity, level: Sensitivity, mode: PassMode, hold: Hold) -> Pass {
        Pass {
            id,
            level,
            mode,
            hold,
        }
    }

    /// The session this pass holds.
    pub fn identity(&self) -> &Identity {
        &self.id
    }

    /// The session's level, read under this pass (and raised by its own escalation).
    pub fn level(&self) -> Sensitivity {
        self.level
    }

    /// Whether the call is joined to its process's kept pass (took no lock and read nothing).
    pub fn is_kept(&self) -> bool {
        matches!(self.hold, Hold::Kept(_))
    }

    /// Shared or exclusive.
    pub fn mode(&self) -> PassMode {
        self.mode
    }

    pub(crate) fn into_parts(self) -> (Identity, Sensitivity, Hold) {
        (self.id, self.level, self.hold)
    }

    pub(crate) fn set_level(&mut self, level: Sensitivity) {
        self.level = level;
    }

    pub(crate) fn set_mode(&mut self, mode: PassMode) {
        self.mode = mode;
    }
}
