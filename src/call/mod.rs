//! The one wrapper every tool call goes through:
//! identity → session pass (state) → instance mode → permission → arguments → re-admission and
//! escalation → write-ahead intent → handler → context → errors → audit outcome.
//! Generated code holds no policy; it all lives here, once. The cross-process rule it follows is
//! stated and enforced in [`crate::state`]: a handler runs only while its call holds a pass on the
//! session, and only after the level read under that pass was admitted.

mod args;
mod output;
mod presets;

pub use args::ArgsSchema;
pub use output::CallOutcome;
pub use presets::{PresetsError, server_presets};

use crate::audit::{ArgsSummary, AuditLog, AuditRecord, Outcome, Phase, new_call_id};
use crate::auth::{Grants, ScopeRequirements};
use crate::connectors::{ConnectorError, Connectors};
use crate::context::Presets;
use crate::errors::ToolError;
use crate::identity::{self, Identity};
use crate::metrics::{Metrics, Refusal};
use crate::policy::{NetworkMode, Permission, Sensitivity};
use crate::server::{JsonObject, Server, ToolContext};
use crate::signals::CallSignals;
use crate::state::{Pass, StateError, StateStore};
use crate::tooldef::{Target, ToolDef};
use crate::workspace::{LazyWorkspace, WorkspaceRoot};
use futures::FutureExt;
use serde_json::Value;
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
    state: Arc<StateStore>,
    audit: AuditLog,
    schemas: HashMap<&'static str, ArgsSchema>,
    /// Declared results, checked before a result leaves (a mismatch is a bug, never sent).
    outputs: HashMap<&'static str, jsonschema::Validator>,
    calls: tokio::sync::Semaphore,
    max_calls: usize,
    metrics: Arc<Metrics>,
    scopes: ScopeRequirements,
    isolation: Arc<crate::isolation::selfcheck::IsolationStatus>,
}

/// Limits of one runtime (`limits:` in config.yaml).
#[derive(Clone, Copy, Debug)]
pub struct CallLimits {
    /// Tool calls running at once; beyond it a call gets a retryable "busy".
    pub max_concurrent_calls: usize,
    /// Memory budget of one call's streamed result.
    pub stream: crate::connectors::StreamBudget,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_concurrent_calls: 64,
            stream: crate::connectors::StreamBudget::default(),
        }
    }
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

/// One call's audit trail: the intent (when written ahead) and exactly one outcome. Dropped before
/// [`finish`](CallAudit::finish) (the caller went away and the call future was dropped), it records
/// the outcome `cancelled`.
struct CallAudit<'a> {
    log: &'a AuditLog,
    metrics: &'a Metrics,
    server: &'a str,
    started: std::time::Instant,
    started_at: std::time::SystemTime,
    call: String,
    id: &'a Identity,
    tool: &'a str,
    permission: Option<Permission>,
    args: ArgsSummary,
    /// The arguments' values, to keep them out of every detail and log line.
    redact: crate::audit::Redactor,
    levels: (Sensitivity, Sensitivity),
    done: bool,
}

impl CallAudit<'_> {
    fn record(
        &self,
        phase: Phase,
        outcome: Option<Outcome>,
        detail: Option<String>,
    ) -> AuditRecord {
        AuditRecord::new(
            &self.call,
            phase,
            self.id,
            self.tool,
            self.permission,
            self.levels,
            outcome,
            self.args.clone(),
            detail,
        )
    }

    /// Writes the intent and waits until it is durable.
    async fn intent(&self) -> Result<(), ToolError> {
        let rec = self.record(Phase::Intent, None, None);
        self.log.append_durable(&rec).await.map_err(|e| {
            tracing::error!(call = %self.call, error = %e, "write-ahead audit failed; call refused");
            ToolError::fatal(format!("{}, so this call is refused", e.for_model()))
        })
    }

    /// A failed call. A failure the model cannot fix (fatal, a bug) is also logged at warn
    /// (rate-limited). Neither the log line nor the audit detail carries argument values
    /// ([`crate::audit::Redactor`]).
    fn failed(self, err: &ToolError) {
        let detail = self.redact.detail(err);
        if !matches!(err, ToolError::Retryable(_)) {
            static SITE: crate::ratelog::Limiter = crate::ratelog::Limiter::new();
            if let Some(more) = SITE.allow() {
                tracing::warn!(call = %self.call, tool = self.tool, error = %detail, suppressed = more, "tool call failed");
            }
        }
        self.finish(Outcome::Error, Some(detail));
    }

    /// Records the call's one outcome: the audit record and the metrics.
    fn finish(mut self, outcome: Outcome, detail: Option<String>) {
        self.done = true;
        let detail = detail.map(|d| self.redact.apply(&d));
        self.observe(outcome);
        let rec = self.record(Phase::Outcome, Some(outcome), detail);
        if let Err(e) = self.log.append(&rec) {
            tracing::error!(call = %self.call, error = %e, "audit append failed");
        }
    }

    /// A refusal: recorded with its reason.
    fn refuse(self, why: Refusal, detail: Option<String>) {
        self.metrics.refused(why);
        self.finish(Outcome::Blocked, detail);
    }

    /// Metrics and the call's span: the one place every outcome passes.
    /// A name the caller made up (an unknown tool) is never a label: labels stay bounded by
    /// the spec, whatever clients send.
    fn observe(&self, outcome: Outcome) {
        let tool = if self.permission.is_some() {
            self.tool
        } else {
            "(unknown)"
        };
        self.metrics
            .call(tool, outcome.as_str(), self.started.elapsed());
        crate::telemetry::record(crate::telemetry::CallSpan {
            call_id: &self.call,
            server: self.server,
            tool,
            permission: self.permission.map(Permission::as_str),
            outcome: outcome.as_str(),
            levels: (self.levels.0.as_str(), self.levels.1.as_str()),
            started: self.started_at,
        });
        if outcome == Outcome::Escalated {
            self.metrics.escalated(self.levels.1.as_str());
        }
    }
}

impl Drop for CallAudit<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.observe(Outcome::Cancelled);
            let rec = self.record(Phase::Outcome, Some(Outcome::Cancelled), None);
            let _ = self.log.append(&rec);
        }
    }
}

impl Runtime {
    /// Assembles a runtime; checks that every tool's preset exists and every schema compiles.
    pub fn new(
        server: Server,
        mode: NetworkMode,
        presets: Presets,
        workspaces: WorkspaceRoot,
        state: Arc<StateStore>,
        audit: AuditLog,
    ) -> Result<Runtime, RuntimeError> {
        let mut schemas = HashMap::new();
        let mut outputs = HashMap::new();
        for tool in server
            .def
            .tools
            .iter()
            .chain(server.def.resources.iter().map(|r| &r.tool))
        {
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
            if let Some(text) = tool.output_schema {
                let value: Value =
                    serde_json::from_str(text).map_err(|e| RuntimeError::Schema {
                        tool: tool.name,
                        reason: format!("output schema is not JSON: {e}"),
                    })?;
                let v = jsonschema::validator_for(&value).map_err(|e| RuntimeError::Schema {
                    tool: tool.name,
                    reason: format!("output schema does not compile: {e}"),
                })?;
                outputs.insert(tool.name, v);
            }
        }
        let used = |name: &str| {
            server.def.tools.iter().any(
                |t| matches!(t.target, Target::Connector { connector, .. } if connector == name),
            )
        };
        let connectors = Connectors::from_env(server.connectors.iter().filter(|c| used(c.name)))?;
        let limits = CallLimits::default();
        Ok(Runtime {
            server,
            connectors,
            mode,
            presets,
            workspaces,
            state,
            audit,
            schemas,
            outputs,
            calls: tokio::sync::Semaphore::new(limits.max_concurrent_calls),
            max_calls: limits.max_concurrent_calls,
            metrics: Arc::new(Metrics::new()),
            scopes: ScopeRequirements::default(),
            isolation: Default::default(),
        })
    }

    /// Requires token scopes per permission (`auth.scopes`).
    pub fn with_scopes(mut self, scopes: ScopeRequirements) -> Runtime {
        self.scopes = scopes;
        self
    }

    /// Readiness checks (`/readyz`): the compliance store answers and is the one opened, the
    /// audit log is writable, the process's network fits its mode, each probed connector is
    /// reachable. Each entry: what was checked
    /// and, when it failed, why (no host paths).
    pub async fn readiness(&self) -> Vec<(String, Result<(), String>)> {
        let mut out = vec![
            (
                "state".to_string(),
                self.state
                    .check()
                    .await
                    .map_err(|e| e.for_model().to_string()),
            ),
            (
                "audit".to_string(),
                self.audit.healthy().map_err(|e| e.for_model().to_string()),
            ),
        ];
        let isolation = if self.isolation.is_unchecked() && self.mode != NetworkMode::Full {
            Err("started with --unisolated: its network is not checked".to_string())
        } else {
            crate::isolation::selfcheck::check(self.mode)
        };
        out.push((format!("mode {}", self.mode), isolation));
        for (name, result) in self.connectors.probe().await {
            out.push((format!("connector {name}"), result));
        }
        out
    }

    /// The result of this instance's isolation self-check (see `isolation::selfcheck`).
    pub fn isolation(&self) -> &Arc<crate::isolation::selfcheck::IsolationStatus> {
        &self.isolation
    }

    /// This runtime's metrics (served at `/metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Applies call limits (concurrency, memory per streamed result).
    pub fn with_limits(mut self, limits: CallLimits) -> Runtime {
        let n = limits.max_concurrent_calls.max(1);
        self.calls = tokio::sync::Semaphore::new(n);
        self.max_calls = n;
        self.connectors = self.connectors.with_budget(limits.stream);
        self
    }

    /// The files and folders this server's connectors read, by connector and setting.
    pub fn data_paths(&self) -> Vec<(&'static str, &'static str, &std::path::Path)> {
        self.connectors.data_paths()
    }

    /// The server this runtime serves.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The network mode this instance runs in.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// The state store.
    pub fn state(&self) -> &StateStore {
        &self.state
    }

    /// The audit log.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// The session's current level for reports, failing closed. Never used to admit a call.
    pub async fn level(&self, id: &Identity) -> Sensitivity {
        self.state.peek(id).await
    }

    /// Runs one tool call under every policy. Never panics; never returns a protocol error.
    pub async fn call(
        &self,
        id: &Identity,
        tool_name: &str,
        args: Option<JsonObject>,
    ) -> CallOutcome {
        self.call_with(id, &Grants::All, tool_name, args, &CallSignals::new())
            .await
    }

    /// [`call`](Runtime::call) with the caller's signals: progress and warnings flow into
    /// `signals`, and dropping this future (the caller cancelled) stops the work it started,
    /// records the outcome `cancelled` and leaves no partial result file.
    pub async fn call_with(
        &self,
        id: &Identity,
        grants: &Grants,
        tool_name: &str,
        args: Option<JsonObject>,
        signals: &CallSignals,
    ) -> CallOutcome {
        let Some(tool) = self.server.def.tool(tool_name) else {
            let level = self.state.peek(id).await;
            let audit = CallAudit {
                log: &self.audit,
                metrics: &self.metrics,
                server: self.server.def.name,
                started: std::time::Instant::now(),
                started_at: std::time::SystemTime::now(),
                call: new_call_id(),
                id,
                tool: tool_name,
                permission: None,
                args: ArgsSummary::of(args.as_ref()),
                redact: crate::audit::Redactor::of(args.as_ref()),
                levels: (level, level),
                done: false,
            };
            let err = ToolError::retry(format!("unknown tool `{tool_name}`"));
            audit.failed(&err);
            return CallOutcome::error(err, level);
        };
        self.call_def(id, grants, tool, args, signals).await
    }

    /// Reads a resource by URI: the resource's hidden read tool, through the same wrapper (its
    /// sensitivity raises the session, the read is audited). `None` when no resource matches.
    pub async fn read_resource(
        &self,
        id: &Identity,
        uri: &str,
    ) -> Option<(&'static crate::resourcedef::ResourceDef, CallOutcome)> {
        self.read_resource_as(id, &Grants::All, uri).await
    }

    /// [`read_resource`](Runtime::read_resource) for a caller with `grants`.
    pub async fn read_resource_as(
        &self,
        id: &Identity,
        grants: &Grants,
        uri: &str,
    ) -> Option<(&'static crate::resourcedef::ResourceDef, CallOutcome)> {
        let (resource, vars) = self
            .server
            .def
            .resources
            .iter()
            .find_map(|r| r.matches(uri).map(|v| (r, v)))?;
        let schema = self.schemas.get(resource.tool.name);
        let mut args = JsonObject::new();
        for (name, raw) in vars {
            let ty = schema.and_then(|s| s.property_type(name));
            let value = match ty.as_deref() {
                Some("integer") => raw.parse::<i64>().map(Value::from).ok(),
                Some("number") => raw.parse::<f64>().ok().map(Value::from),
                Some("boolean") => raw.parse::<bool>().ok().map(Value::from),
                _ => Some(Value::String(raw.clone())),
            };
            let Some(value) = value else {
                let level = self.state.peek(id).await;
                let err = ToolError::retry(format!(
                    "`{name}` in `{uri}` must be {}",
                    ty.as_deref().unwrap_or("a string")
                ));
                return Some((resource, CallOutcome::error(err, level)));
            };
            args.insert(name.to_string(), value);
        }
        let signals = CallSignals::new();
        Some((
            resource,
            self.call_def(id, grants, &resource.tool, Some(args), &signals)
                .await,
        ))
    }

    /// Runs one call of `tool` (a listed tool or a resource's read) under every policy.
    async fn call_def(
        &self,
        id: &Identity,
        grants: &Grants,
        tool: &'static ToolDef,
        args: Option<JsonObject>,
        signals: &CallSignals,
    ) -> CallOutcome {
        // Dropped with this future: the work it started (a blocking scan) stops at its next tick.
        let _stop = signals.stop_on_drop();
        let mut audit = CallAudit {
            log: &self.audit,
            metrics: &self.metrics,
            server: self.server.def.name,
            started: std::time::Instant::now(),
            started_at: std::time::SystemTime::now(),
            call: new_call_id(),
            id,
            tool: tool.name,
            permission: Some(tool.permission),
            args: ArgsSummary::of(args.as_ref()),
            redact: crate::audit::Redactor::of(args.as_ref()),
            levels: (Sensitivity::Public, Sensitivity::Public),
            done: false,
        };
        // Bounded work: beyond the limit a call is refused at once (retryable), never queued.
        let Ok(_running) = self.calls.try_acquire() else {
            let level = self.state.peek(id).await;
            audit.levels = (level, level);
            let err = ToolError::retry(format!(
                "the server is busy: {} tool calls are running, its limit (limits.max_concurrent_calls); retry in a moment",
                self.max_calls
            ));
            audit.refuse(Refusal::Busy, Some(err.to_string()));
            return CallOutcome::error(err, level);
        };
        // The token must carry the scope this permission requires (static: before any state).
        if let Some(need) = self.scopes.for_permission(tool.permission)
            && !grants.has(need)
        {
            let level = self.state.peek(id).await;
            audit.levels = (level, level);
            let err = ToolError::fatal(format!(
                "`{}` needs the scope `{need}` (auth.scopes.{}), which this token does not grant; get a token with that scope",
                tool.name,
                tool.permission.as_str()
            ));
            audit.refuse(Refusal::Scope, Some(err.to_string()));
            return CallOutcome::error(err, level);
        }
        if let Some(why) = self.isolation.broken_because() {
            let level = self.state.peek(id).await;
            audit.levels = (level, level);
            let err = ToolError::fatal(format!(
                "this `{}` instance failed its isolation check ({why}), so it runs no tool until that is fixed",
                self.mode
            ));
            audit.refuse(Refusal::Isolation, Some(err.to_string()));
            return CallOutcome::error(err, level);
        }
        if let Err(e) = self.audit.healthy() {
            tracing::error!(error = %e, "audit log unhealthy; refusing calls");
            let err = ToolError::fatal(format!("{}, so every call is refused", e.for_model()));
            audit.levels = (Sensitivity::Secret, Sensitivity::Secret);
            audit.refuse(Refusal::Audit, Some(e.to_string()));
            return CallOutcome::error(err, Sensitivity::Secret);
        }
        // Step 1: a shared pass; the level read under it is the one admitted.
        let mut pass = match self.state.enter(id).await {
            Ok(p) => p,
            Err(e) => return self.state_failure(audit, tool, e),
        };
        let before = pass.level();
        audit.levels = (before, before);
        if let Err(refused) = self.admit(tool, before) {
            return self.refuse(audit, pass, tool, refused).await;
        }
        let args = match self.schemas.get(tool.name).map(|s| s.prepare(args)) {
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                audit.failed(&e);
                self.state.leave(pass).await;
                return CallOutcome::error(e, before);
            }
            None => {
                let e = ToolError::bug(format!("no schema for `{}`", tool.name));
                audit.failed(&e);
                self.state.leave(pass).await;
                return CallOutcome::error(e, before);
            }
        };
        // Step 2: an escalating call takes the pass exclusively, decides again on the level read
        // under it (re-admission), writes its intent, escalates, and keeps the pass shared.
        if tool.sensitivity > before {
            self.state.leave(pass).await;
            pass = match self.state.enter_exclusive(id).await {
                Ok(p) => p,
                Err(e) => return self.state_failure(audit, tool, e),
            };
            let now = pass.level();
            let target = now.max(tool.sensitivity);
            audit.levels = (now, target);
            if let Err(refused) = self.admit(tool, target) {
                audit.levels = (now, now);
                return self.refuse(audit, pass, tool, refused).await;
            }
            crate::failpoint!("call.escalate.before_intent");
            if let Err(e) = audit.intent().await {
                audit.levels = (now, now);
                return self.fail(audit, pass, e, now).await;
            }
            crate::failpoint!("call.escalate.after_intent");
            let dataset = dataset_name(tool, &args);
            let after = match self
                .state
                .escalate(&mut pass, &dataset, tool.sensitivity)
                .await
            {
                Ok(level) => level,
                Err(e) => return self.state_failure(audit, tool, e),
            };
            audit.levels = (now, after);
            if let Err(refused) = self.admit(tool, after) {
                return self.refuse(audit, pass, tool, refused).await;
            }
        } else if tool.permission == Permission::Connect {
            // A connect call: its intent is durable before anything leaves the process.
            if let Err(e) = audit.intent().await {
                return self.fail(audit, pass, e, before).await;
            }
            crate::failpoint!("call.connect.after_intent");
        }
        // Step 3: the handler, under the pass.
        let level = pass.level();
        let result = self.run(id, tool, level, args, signals).await;
        crate::failpoint!("call.after_handler");
        match &result {
            Ok(_) if audit.levels.1 > audit.levels.0 => audit.finish(Outcome::Escalated, None),
            Ok(_) => audit.finish(Outcome::Allowed, None),
            Err(e) => audit.failed(e),
        }
        self.state.leave(pass).await;
        match result {
            Ok(out) => out,
            Err(e) => CallOutcome::error(e, level),
        }
    }

    /// A refused call: recorded, pass given back, the instance the session needs in `_meta`.
    async fn refuse(
        &self,
        audit: CallAudit<'_>,
        pass: Pass,
        tool: &ToolDef,
        (why, err): (Refusal, ToolError),
    ) -> CallOutcome {
        let level = pass.level();
        audit.refuse(why, Some(err.to_string()));
        self.state.leave(pass).await;
        let mut out = CallOutcome::error(err, level);
        out.required_mode = level.max(tool.sensitivity).required_mode();
        out
    }

    /// The write-ahead intent could not be written: the call is refused.
    async fn fail(
        &self,
        audit: CallAudit<'_>,
        pass: Pass,
        err: ToolError,
        level: Sensitivity,
    ) -> CallOutcome {
        self.metrics.refused(Refusal::Audit);
        audit.failed(&err);
        self.state.leave(pass).await;
        CallOutcome::error(err, level)
    }

    /// The state could not be read or written: fail closed (the session counts as secret).
    fn state_failure(
        &self,
        mut audit: CallAudit<'_>,
        tool: &ToolDef,
        e: StateError,
    ) -> CallOutcome {
        tracing::error!(call = %audit.call, error = %e, "compliance state unavailable; call refused");
        let level = e.fail_closed_level();
        audit.levels = (level, level);
        let err = ToolError::fatal(format!(
            "{}, so the session is treated as {level} and this call is refused",
            e.for_model()
        ));
        audit.refuse(Refusal::State, Some(e.to_string()));
        let mut out = CallOutcome::error(err, level);
        out.required_mode = level.max(tool.sensitivity).required_mode();
        out
    }

    /// Whether the call may run with the session at `level`, on this instance.
    fn admit(&self, tool: &ToolDef, level: Sensitivity) -> Result<(), (Refusal, ToolError)> {
        let needed = level.max(tool.sensitivity);
        if !self.mode.serves(needed) {
            let want = needed.required_mode();
            return Err((
                Refusal::Mode,
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
                Refusal::ConnectBlocked,
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
        signals: &CallSignals,
    ) -> Result<CallOutcome, ToolError> {
        let workspace = LazyWorkspace::new(&self.workspaces, id);
        let key = crate::workspace::query_key(tool.name, &args);
        let cx = ToolContext::new(id.clone(), level, tool, signals.clone());
        let fut = async {
            match tool.target {
                Target::Handler => self.server.handlers.call(tool.name, cx, args).await,
                Target::Static(text) => Ok(crate::server::ToolOutput::Text(text.to_string())),
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
                        signals,
                    )
                    .await
                }
            }
        };
        let output = match AssertUnwindSafe(identity::scope(id.clone(), fut))
            .catch_unwind()
            .await
        {
            Ok(Err(e)) => {
                if let Target::Connector { connector, .. } = tool.target
                    && !matches!(e, ToolError::Retryable(_))
                {
                    self.metrics.connector_error(connector);
                }
                return Err(e);
            }
            Ok(Ok(out)) => out,
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
        let out = output::shape(preset, &workspace, tool, output, level, key, signals).await?;
        self.check_declared(tool, out)
    }

    /// A result of a tool that declares its output must match it; a mismatch is a bug in the
    /// server (logged) and the result is never sent.
    fn check_declared(&self, tool: &ToolDef, out: CallOutcome) -> Result<CallOutcome, ToolError> {
        let Some(validator) = self.outputs.get(tool.name) else {
            return Ok(out);
        };
        let problem = match &out.structured {
            None => Some("no structured result".to_string()),
            Some(v) => validator
                .iter_errors(v)
                .next()
                .map(|e| format!("{} at `{}`", e, e.instance_path())),
        };
        match problem {
            None => Ok(out),
            Some(p) => {
                tracing::error!(tool = tool.name, problem = %p, "result does not match the declared output schema; not sent");
                Err(ToolError::fatal(format!(
                    "`{}` produced a result that does not match its declared output schema (a defect in this server); the result was not sent",
                    tool.name
                )))
            }
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
