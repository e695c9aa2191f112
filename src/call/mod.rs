//! The one wrapper every tool call goes through:
//! identity → instance mode → permission → arguments → escalation → handler → context → errors → audit.
//! Generated code holds no policy; it all lives here, once.

mod args;
mod guard;
mod output;
mod presets;

pub use args::ArgsSchema;
pub use output::CallOutcome;
pub use presets::{PresetsError, server_presets};

use crate::compliance::{AuditLog, AuditRecord, ComplianceStore, Outcome};
use crate::connectors::{ConnectorError, Connectors};
use crate::context::Presets;
use crate::errors::ToolError;
use crate::identity::{self, Identity};
use crate::policy::{NetworkMode, Permission, Sensitivity};
use crate::server::{JsonObject, Server, ToolContext};
use crate::tooldef::{Target, ToolDef};
use crate::workspace::{LazyWorkspace, WorkspaceRoot};
use futures::FutureExt;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// Everything a server needs at run time besides its generated definition.
pub struct Runtime {
    server: Server,
    connectors: Connectors,
    mode: NetworkMode,
    presets: Presets,
    workspaces: WorkspaceRoot,
    compliance: Arc<ComplianceStore>,
    audit: AuditLog,
    schemas: HashMap<&'static str, ArgsSchema>,
    guards: guard::SessionGuards,
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A tool's context preset is unknown to the runtime (spec and config disagree).
    #[error("tool `{tool}` uses context preset `{preset}`, which is not configured")]
    UnknownPreset {
        /// Tool name.
        tool: &'static str,
        /// Preset name.
        preset: &'static str,
    },
    /// A generated input schema failed to compile (a generator bug).
    #[error("tool `{tool}`: {reason}")]
    Schema {
        /// Tool name.
        tool: &'static str,
        /// Why.
        reason: String,
    },
    /// A connector's settings are missing or malformed.
    #[error(transparent)]
    Connector(#[from] ConnectorError),
}

impl Runtime {
    /// Assembles a runtime; checks that every tool's preset exists and every schema compiles.
    pub fn new(
        server: Server,
        mode: NetworkMode,
        presets: Presets,
        workspaces: WorkspaceRoot,
        compliance: Arc<ComplianceStore>,
        audit: AuditLog,
    ) -> Result<Runtime, RuntimeError> {
        let mut schemas = HashMap::new();
        for tool in server.def.tools {
            if presets.get(tool.context).is_none() {
                return Err(RuntimeError::UnknownPreset {
                    tool: tool.name,
                    preset: tool.context,
                });
            }
            let schema =
                ArgsSchema::compile(tool.input_schema).map_err(|reason| RuntimeError::Schema {
                    tool: tool.name,
                    reason,
                })?;
            schemas.insert(tool.name, schema);
        }
        let used = |name: &str| {
            server.def.tools.iter().any(
                |t| matches!(t.target, Target::Connector { connector, .. } if connector == name),
            )
        };
        let connectors = Connectors::from_env(server.connectors.iter().filter(|c| used(c.name)))?;
        Ok(Runtime {
            server,
            connectors,
            mode,
            presets,
            workspaces,
            compliance,
            audit,
            schemas,
            guards: Default::default(),
        })
    }

    /// The server this runtime serves.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The network mode this instance runs in.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// The session's current level, failing closed (an unreadable record counts as `secret`).
    pub fn level(&self, id: &Identity) -> Sensitivity {
        self.compliance.level_fail_closed(id).0
    }

    /// Runs one tool call under every policy. Never panics; never returns a protocol error.
    pub async fn call(
        &self,
        id: &Identity,
        tool_name: &str,
        args: Option<JsonObject>,
    ) -> CallOutcome {
        let Some(tool) = self.server.def.tool(tool_name) else {
            let level = self.level(id);
            return CallOutcome::error(
                ToolError::retry(format!("unknown tool `{tool_name}`")),
                level,
            );
        };
        let lock = self.guards.of(id);
        let connect = tool.permission == Permission::Connect;
        // `connect` calls hold the session's lock for their whole run (shared; exclusive while they
        // escalate); escalations take it exclusively. So inside this process no `connect` call runs
        // while its session escalates, and one that starts afterwards sees the raised level.
        let mut shared = if connect {
            Some(lock.read().await)
        } else {
            None
        };
        let (before, store_error) = self.compliance.level_fail_closed(id);
        if let Some(out) = self.refusal(id, tool, before, store_error) {
            return out;
        }
        let args = match self.schemas.get(tool.name).map(|s| s.prepare(args)) {
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                self.record(
                    id,
                    tool,
                    before,
                    before,
                    Outcome::Error,
                    Some(e.to_string()),
                );
                return CallOutcome::error(e, before);
            }
            None => {
                return CallOutcome::error(
                    ToolError::bug(format!("no schema for `{}`", tool.name)),
                    before,
                );
            }
        };
        let (before, after) = if tool.sensitivity > before {
            drop(shared.take());
            let exclusive = lock.write().await;
            // The level may have risen while this call waited for the lock: decide again.
            let (now, store_error) = self.compliance.level_fail_closed(id);
            if let Some(out) = self.refusal(id, tool, now, store_error) {
                return out;
            }
            let raised =
                match self
                    .compliance
                    .escalate(id, &dataset_name(tool, &args), tool.sensitivity)
                {
                    Ok(level) => level,
                    Err(e) => {
                        let err = ToolError::fatal(format!(
                            "compliance store unavailable, refusing to load {} data: {e}",
                            tool.sensitivity
                        ));
                        self.record(id, tool, now, now, Outcome::Error, Some(err.to_string()));
                        return CallOutcome::error(err, Sensitivity::Secret);
                    }
                };
            if connect {
                shared = Some(exclusive.downgrade());
            }
            (now, raised)
        } else {
            (before, before)
        };
        let result = self.run(id, tool, after, args).await;
        let outcome = match &result {
            Ok(_) if after > before => Outcome::Escalated,
            Ok(_) => Outcome::Allowed,
            Err(_) => Outcome::Error,
        };
        let detail = result.as_ref().err().map(ToString::to_string);
        self.record(id, tool, before, after, outcome, detail);
        drop(shared);
        match result {
            Ok(out) => out,
            Err(e) => CallOutcome::error(e, after),
        }
    }

    /// The recorded refusal, when the call may not run at `level`.
    fn refusal(
        &self,
        id: &Identity,
        tool: &ToolDef,
        level: Sensitivity,
        store_error: Option<crate::compliance::ComplianceError>,
    ) -> Option<CallOutcome> {
        let (outcome, err) = self
            .admit(tool, level, store_error.map(|e| e.to_string()))
            .err()?;
        self.record(id, tool, level, level, outcome, Some(err.to_string()));
        let mut out = CallOutcome::error(err, level);
        out.required_mode = level.max(tool.sensitivity).required_mode();
        Some(out)
    }

    /// Whether the call may run at all, given the session's level and this instance's mode.
    fn admit(
        &self,
        tool: &ToolDef,
        level: Sensitivity,
        store_error: Option<String>,
    ) -> Result<(), (Outcome, ToolError)> {
        if let Some(e) = store_error {
            return Err((
                Outcome::Blocked,
                ToolError::fatal(format!(
                    "compliance record unreadable, session treated as secret: {e}"
                )),
            ));
        }
        let needed = level.max(tool.sensitivity);
        if !self.mode.serves(needed) {
            let want = needed.required_mode();
            return Err((
                Outcome::Blocked,
                ToolError::fatal(format!(
                    "this instance runs with network mode `{}` and cannot serve {} data; use the `{}` instance of this server ({})",
                    self.mode,
                    needed,
                    want,
                    if want == NetworkMode::None {
                        "url_isolated"
                    } else {
                        "url_proxied"
                    }
                )),
            ));
        }
        if tool.permission == Permission::Connect && level.is_private() {
            return Err((
                Outcome::Blocked,
                ToolError::fatal(format!(
                    "`{}` reaches the network and this session holds {level} data; connect tools stay blocked for the rest of the session",
                    tool.name
                )),
            ));
        }
        Ok(())
    }

    async fn run(
        &self,
        id: &Identity,
        tool: &'static ToolDef,
        level: Sensitivity,
        args: JsonObject,
    ) -> Result<CallOutcome, ToolError> {
        let workspace = LazyWorkspace::new(&self.workspaces, id);
        let cx = ToolContext::new(id.clone(), level, tool);
        let fut = async {
            match tool.target {
                Target::Handler => self.server.handlers.call(tool.name, cx, args).await,
                Target::Connector {
                    connector,
                    operation,
                } => {
                    crate::connectors::call(
                        &self.connectors,
                        connector,
                        operation,
                        &workspace,
                        args,
                    )
                    .await
                }
            }
        };
        let output = match AssertUnwindSafe(identity::scope(id.clone(), fut))
            .catch_unwind()
            .await
        {
            Ok(r) => r?,
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".into());
                tracing::error!(tool = tool.name, %msg, "tool panicked");
                return Err(ToolError::bug(format!(
                    "tool `{}` failed unexpectedly",
                    tool.name
                )));
            }
        };
        let preset = self
            .presets
            .get(tool.context)
            .expect("checked in Runtime::new");
        output::shape(preset, &workspace, tool, output, level).await
    }

    fn record(
        &self,
        id: &Identity,
        tool: &ToolDef,
        before: Sensitivity,
        after: Sensitivity,
        outcome: Outcome,
        detail: Option<String>,
    ) {
        let rec = AuditRecord::now(
            id,
            tool.name,
            tool.permission,
            before,
            after,
            outcome,
            detail,
        );
        if let Err(e) = self.audit.append(&rec) {
            tracing::error!(error = %e, "audit log append failed");
        }
    }
}

/// Fills a dataset template (`dataset:{dataset_name}`) from validated arguments.
pub fn dataset_name(tool: &ToolDef, args: &JsonObject) -> String {
    let mut out = String::new();
    let mut rest = tool.dataset;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let key = &after[..close];
        match args.get(key) {
            Some(serde_json::Value::String(s)) => out.push_str(s),
            Some(v) => out.push_str(&v.to_string()),
            None => out.push('-'),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}
