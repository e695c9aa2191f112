//! Serving generated servers over MCP: building a runtime from `config.yaml`, Streamable HTTP
//! (with the auth layer) and stdio.

pub mod auth;
pub mod catalog;
pub mod direct;
pub mod handler;
pub mod hosts;
pub mod http;
pub mod inflight;
pub mod listener;
pub mod notify;
mod protocol;
pub mod sessions;
pub mod stdio;

use crate::audit::AuditLog;
use crate::call::{Runtime, server_presets};
use crate::config::Config;
use crate::policy::NetworkMode;
use crate::project::Project;
use crate::state::{InitPolicy, StateStore, StoreLocation, StoreOptions};
use crate::workspace::WorkspaceRoot;
use std::sync::Arc;
use std::time::Duration;

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

/// The store options of `server` from `config`.
pub fn store_options(config: &Config, server: &str) -> StoreOptions {
    StoreOptions {
        server: server.to_owned(),
        scope: config.state.trust_domain.clone(),
        lock_timeout: Duration::from_millis(config.state.lock_timeout_ms.max(1)),
        keep: crate::state::KeepSettings {
            idle: Duration::from_millis(config.state.keep_idle_ms),
            check: Duration::from_millis(config.state.keep_check_ms.max(1)),
            max_age: Duration::from_millis(config.state.keep_max_age_ms),
            max: config.state.max_kept,
        },
    }
}

/// Opens the state store of `server` under `policy` as its instance in `mode` does, checked
/// against the markers of the workspace layers that instance sees (see [`crate::state::init`]).
pub async fn open_state(
    config: &Config,
    server: &str,
    mode: NetworkMode,
    policy: InitPolicy,
) -> Result<StateStore, ServeError> {
    let location = config.state.location();
    crate::state::init::open_store(
        &location,
        store_options(config, server),
        &config.state.workspace_layer(server, mode),
        &config.state.workspace_lower(server, mode),
        policy,
    )
    .await
    .map_err(|e| setup("compliance store")(&e))
}

/// Where `server`'s audit log file is, beside a SQLite store.
pub fn audit_path(config: &Config, server: &str) -> std::path::PathBuf {
    config.state.dir.join(format!("audit-{server}.jsonl"))
}

/// Opens the audit log of `server`: a JSON-lines file beside a SQLite store, the
/// `bulkhead_audit` table of a PostgreSQL store; its chain's heads go into `state`'s checkpoints.
pub fn open_audit(
    config: &Config,
    server: &str,
    state: &StateStore,
) -> Result<AuditLog, ServeError> {
    use crate::audit::heads::{Heads, PgHeads, SqliteHeads};
    let options = config.audit.options();
    // Built only when used: a PostgreSQL heads store owns a runtime, which must not be dropped here
    // (an async context); the writer thread drops it.
    let chained = options.chain;
    let kept = options.checkpoints_kept;
    let (sink, heads): (Box<dyn crate::audit::AuditSink>, Option<Box<dyn Heads>>) =
        match (config.state.location(), state) {
            (StoreLocation::Postgres(pg), _) => (
                Box::new(
                    crate::audit::PgAuditSink::new(&pg, server)
                        .map_err(|e| setup("audit log")(&e))?,
                ),
                match chained {
                    true => Some(Box::new(
                        PgHeads::new(&pg, kept).map_err(|e| setup("audit log")(&e))?,
                    )),
                    false => None,
                },
            ),
            (StoreLocation::Sqlite { .. }, StateStore::Sqlite(s)) => {
                let path = audit_path(config, server);
                let file = crate::audit::AuditFile::open(&path, options.rotate_bytes, options.keep)
                    .map_err(|e| setup("audit log")(&format!("{}: {e}", path.display())))?;
                (
                    Box::new(file),
                    match chained {
                        true => Some(Box::new(
                            SqliteHeads::open(s.path(), kept)
                                .map_err(|e| setup("audit log")(&e))?,
                        )),
                        false => None,
                    },
                )
            }
            (StoreLocation::Sqlite { .. }, StateStore::Postgres(_)) => {
                return Err(ServeError::Setup(
                    "audit log: the store is PostgreSQL but the configuration names SQLite".into(),
                ));
            }
        };
    AuditLog::start_checkpointed(sink, options, server, heads).map_err(|e| setup("audit log")(&e))
}

/// Builds the runtime of server `name` in network `mode` from `config`. The store must exist, or
/// this must be the first start of a fresh deployment ([`InitPolicy::FirstStart`]).
pub async fn runtime(
    project: &Project,
    config: &Config,
    name: &str,
    mode: NetworkMode,
) -> Result<Runtime, ServeError> {
    let server = project
        .server(name)
        .ok_or_else(|| ServeError::UnknownServer(name.to_string(), project.server_names()))?;
    let presets = server_presets(server.def, config.context.presets.as_ref())
        .map_err(|e| setup("context presets")(&e))?;
    let workspaces = WorkspaceRoot::new(config.state.workspace_layer(name, mode))
        .map_err(|e| setup("workspace root")(&e))?
        .with_lower(config.state.workspace_lower(name, mode))
        .with_max_read_bytes(config.workspace.max_read_bytes)
        .with_open_dirs(config.workspace.open_dirs)
        .with_limits(config.workspace.disk_limits())
        .with_host_owner(
            crate::workspace::HostOwner::for_this_process(config.workspace.host_uid)
                .map_err(|e| setup("workspace owner")(&e))?
                .map(Arc::new),
        )
        .map_err(|e| setup("workspace root")(&e))?;
    let state = open_state(config, name, mode, InitPolicy::FirstStart).await?;
    let audit = open_audit(config, name, &state)?;
    let own_limits = server.def.tools.iter().any(|t| t.rate_limit.is_some());
    let rates = crate::ratelimit::RateLimiter::open(&config.rate_limits, name, &state, own_limits)
        .map_err(ServeError::Setup)?;
    let limits = crate::call::CallLimits {
        max_concurrent_calls: config.limits.max_concurrent_calls,
        stream: crate::connectors::StreamBudget {
            bytes: config.limits.call_memory_bytes,
        },
    };
    let asks = server.def.tools.iter().any(|t| t.approval.is_some());
    let used = if asks {
        Some(crate::approval::UsedIds::open(&state).map_err(ServeError::Setup)?)
    } else {
        None
    };
    let secret = config
        .approvals
        .secret(&config.auth, config.environment, asks)
        .map_err(ServeError::Setup)?;
    let rt = Runtime::new(server, mode, presets, workspaces, Arc::new(state), audit)
        .and_then(|rt| {
            rt.with_limits(limits)
                .with_scopes(config.auth.scopes.clone())
                .with_rate_limits(rates)
                .with_approvals(
                    secret.as_deref(),
                    used,
                    std::time::Duration::from_secs(config.approvals.expiry_secs.max(1)),
                )
        })
        .map_err(|e| setup("runtime")(&e))?;
    let cwd = std::env::current_dir().unwrap_or_default();
    for (connector, setting, path) in rt.data_paths() {
        config
            .state
            .refuse_data_overlap(connector, setting, path, &cwd)
            .map_err(ServeError::Setup)?;
    }
    Ok(rt)
}
