//! Serving generated servers over MCP: building a runtime from `config.yaml`, Streamable HTTP
//! (with the auth layer) and stdio.

pub mod auth;
pub mod handler;
pub mod http;
pub mod stdio;

use crate::call::{Runtime, server_presets};
use crate::compliance::{AuditLog, ComplianceStore};
use crate::config::Config;
use crate::policy::NetworkMode;
use crate::workspace::WorkspaceRoot;
use std::sync::Arc;

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// No generated server has that name.
    #[error("no server named `{0}` in specs/servers (known: {1})")]
    UnknownServer(String, String),
    /// Something in the configuration or state is unusable.
    #[error("{0}")]
    Setup(String),
}

fn setup(what: &str) -> impl Fn(&dyn std::fmt::Display) -> ServeError + '_ {
    move |e| ServeError::Setup(format!("{what}: {e}"))
}

/// Builds the runtime of server `name` in network `mode` from `config`.
pub fn runtime(config: &Config, name: &str, mode: NetworkMode) -> Result<Runtime, ServeError> {
    let server = crate::servers::server(name).ok_or_else(|| {
        let known: Vec<&str> = crate::servers::SERVERS.iter().map(|s| s.name).collect();
        ServeError::UnknownServer(name.to_string(), known.join(", "))
    })?;
    let presets = server_presets(server.def, config.context.presets.as_ref())
        .map_err(|e| setup("context presets")(&e))?;
    let workspaces =
        WorkspaceRoot::new(&config.state.workspaces).map_err(|e| setup("workspace root")(&e))?;
    // A store that cannot be opened still starts the server: every call then fails closed.
    let (store, err) =
        ComplianceStore::open_fail_closed(&config.state.dir.join(format!("compliance-{name}.db")));
    if let Some(e) = err {
        tracing::error!(error = %e, "compliance store unavailable; every call will be refused");
    }
    let audit = AuditLog::open(&config.state.dir.join(format!("audit-{name}.jsonl")))
        .map_err(|e| setup("audit log")(&e))?;
    Runtime::new(server, mode, presets, workspaces, Arc::new(store), audit)
        .map_err(|e| setup("runtime")(&e))
}
