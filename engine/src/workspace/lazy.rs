//! A session workspace opened on first use: most calls never touch the workspace (small results,
//! non-file tools), so they should not pay for opening it.

use super::{SessionWorkspace, WorkspaceRoot};
use crate::errors::ToolError;
use crate::identity::Identity;
use std::sync::{Arc, OnceLock};

/// The caller's workspace, opened (and created) the first time it is needed.
pub struct LazyWorkspace<'a> {
    root: &'a WorkspaceRoot,
    id: &'a Identity,
    cell: OnceLock<Arc<SessionWorkspace>>,
}

impl<'a> LazyWorkspace<'a> {
    /// Nothing is opened yet.
    pub fn new(root: &'a WorkspaceRoot, id: &'a Identity) -> LazyWorkspace<'a> {
        LazyWorkspace {
            root,
            id,
            cell: OnceLock::new(),
        }
    }

    /// The workspace, opened on the first call; an error is fatal (infrastructure, not input).
    pub fn get(&self) -> Result<&Arc<SessionWorkspace>, ToolError> {
        if let Some(ws) = self.cell.get() {
            return Ok(ws);
        }
        let ws = self
            .root
            .session(self.id)
            .map_err(|e| ToolError::fatal(format!("workspace unavailable: {e}")))?;
        Ok(self.cell.get_or_init(|| Arc::new(ws)))
    }
}

/// Something that can hand out the caller's workspace: an open one, or a [`LazyWorkspace`].
pub trait WorkspaceSource: Sync {
    /// The workspace (opening it if needed).
    fn workspace(&self) -> Result<&Arc<SessionWorkspace>, ToolError>;
}

impl WorkspaceSource for Arc<SessionWorkspace> {
    fn workspace(&self) -> Result<&Arc<SessionWorkspace>, ToolError> {
        Ok(self)
    }
}

impl WorkspaceSource for LazyWorkspace<'_> {
    fn workspace(&self) -> Result<&Arc<SessionWorkspace>, ToolError> {
        self.get()
    }
}
