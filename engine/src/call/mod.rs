//! The one wrapper every tool call goes through:
//! identity → session pass (state) → instance mode → permission → arguments → a person's
//! approval when the tool declares one ([`crate::approval`]) → re-admission and
//! escalation → write-ahead intent → handler → context → errors → audit outcome.
//! Generated code holds no policy; it all lives here, once. The cross-process rule it follows is
//! stated and enforced in [`crate::state`]: a handler runs only while its call holds a pass on the
//! session, and only after the level read under that pass was admitted.
//!
//! This file is the pipeline; admission (`admit`), the audit trail (`audit`), the handler step
//! (`run`) and construction and readiness (`build`) each have their own.

mod admit;
mod args;
mod audit;
mod bind;
mod build;
mod inspect;
mod output;
mod presets;
mod run;

pub use args::ArgsSchema;
pub use build::{CallLimits, RuntimeError};
pub use output::CallOutcome;
pub use presets::{PresetsError, server_presets};

use crate::audit::{AuditLog, Outcome};
use crate::auth::{Grants, ScopeRequirements};
use crate::connectors::Connectors;
use crate::context::Presets;
use crate::errors::ToolError;
use crate::identity::Identity;
use crate::metrics::{Metrics, Refusal};
use crate::policy::{NetworkMode, Permission, Sensitivity};
use crate::server::{JsonObject, Server};
use crate::signals::CallSignals;
use crate::state::StateStore;
use crate::tooldef::ToolDef;
use crate::workspace::WorkspaceRoot;
use audit::CallAudit;
use serde_json::Value;
use std::collections::HashMap;
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
    rates: crate::ratelimit::RateLimiter,
    approvals: crate::approval::Approvals,
    /// The credential rules results and `connect` arguments are read with ([`crate::inspect`]).
    rules: &'static crate::inspect::Rules,
    /// The deployment's token service, when this instance serves one: parameters bound to
    /// `exchange:<audience>` get the caller's upstream tokens from it.
    tokens: std::sync::OnceLock<Arc<crate::sessions::TokenService>>,
}

/// How the caller of one call can be asked for approval, and what its token says.
#[derive(Clone, Default)]
pub struct AskContext {
    /// How to ask (none by default).
    pub asker: crate::approval::Asker,
    /// The caller's token's claims (the approver rule).
    pub claims: Option<crate::approval::TokenClaims>,
}

impl Runtime {
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
        self.call_asking(id, grants, tool_name, args, signals, &AskContext::default())
            .await
    }

    /// [`call_with`](Runtime::call_with) where the caller can be asked for approval (`ask`).
    pub async fn call_asking(
        &self,
        id: &Identity,
        grants: &Grants,
        tool_name: &str,
        args: Option<JsonObject>,
        signals: &CallSignals,
        ask: &AskContext,
    ) -> CallOutcome {
        let Some(tool) = self.server.def.tool(tool_name) else {
            return self.refuse_unknown(id, tool_name, args.as_ref()).await;
        };
        self.call_def(id, grants, tool, args, signals, ask).await
    }

    /// A call of a tool this server does not have (an upstream's own name, a made-up one):
    /// refused and audited.
    pub async fn refuse_unknown(
        &self,
        id: &Identity,
        tool_name: &str,
        args: Option<&JsonObject>,
    ) -> CallOutcome {
        let level = self.state.peek(id).await;
        let mut audit = CallAudit::begin(self, id, tool_name, None, args);
        audit.levels = (level, level);
        let err = ToolError::retry(format!("unknown tool `{tool_name}`"));
        audit.failed(&err);
        CallOutcome::error(err, level)
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
            self.call_def(
                id,
                grants,
                &resource.tool,
                Some(args),
                &signals,
                &AskContext::default(),
            )
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
        ask: &AskContext,
    ) -> CallOutcome {
        // Dropped with this future: the work it started (a blocking scan) stops at its next tick.
        let _stop = signals.stop_on_drop();
        let mut audit = CallAudit::begin(self, id, tool.name, Some(tool.permission), args.as_ref());
        // Step 0: what needs no state (a call slot, the token's scope, this instance's isolation).
        let _running = match self.gate(tool, grants) {
            Ok(permit) => permit,
            Err(refused) => return self.refuse_ungated(audit, id, refused).await,
        };
        if self.audit.behind() {
            // Boxed: the rare path, kept out of every call's future.
            Box::pin(self.audit.room()).await;
        }
        if let Err(e) = self.audit.healthy() {
            tracing::error!(error = %e, "audit log unhealthy; refusing calls");
            let err = ToolError::fatal(format!("{}, so every call is refused", e.for_model()));
            audit.levels = (Sensitivity::Secret, Sensitivity::Secret);
            audit.refuse(Refusal::Audit, Some(e.to_string()));
            return CallOutcome::error(err, Sensitivity::Secret);
        }
        // Step 0b: the rate limits, counted in the store before any session lock is taken.
        if let Err(refused) = self.count(id, tool.name, tool.rate_limit).await {
            return self.refuse_ungated(audit, id, refused).await;
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
            Some(Ok(a)) if let Some(refused) = self.credential_in_args(tool, &a) => {
                return self.refuse(audit, pass, tool, refused).await;
            }
            Some(Ok(mut a)) => match bind::bind(tool, &mut a, id, ask.claims.as_ref()) {
                Ok(()) => {
                    audit.bound(tool, &a);
                    a
                }
                Err(e) => {
                    audit.failed(&e);
                    self.state.leave(pass).await;
                    return CallOutcome::error(e, before);
                }
            },
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
        // Step 1b: a person approves, when the tool's approval says so. The pass is left while
        // they are asked (a person may take minutes; escalations of the session must not wait)
        // and taken again after; the level read then is the one admitted.
        let mut before = before;
        if let Some(approval) = self.approvals.needed(tool, &args, before) {
            self.state.leave(pass).await;
            // Boxed, like every rare path below: inline, its future would make every call's
            // future larger (see `connectors::call_in`).
            let shown = crate::approval::shown_args(&args);
            let asking = Box::pin(self.approvals.ask(
                &ask.asker,
                approval,
                id,
                ask.claims.as_ref(),
                tool,
                &args,
                &shown,
                before,
                self.mode,
            ))
            .await;
            match asking {
                crate::approval::Asking::Approved(detail) => {
                    if let Err(e) = audit.approved(detail).await {
                        audit.failed(&e);
                        return CallOutcome::error(e, before);
                    }
                }
                crate::approval::Asking::Pending(pending) => {
                    audit.finish(
                        Outcome::AwaitingApproval,
                        Some("asked a person (input_required)".into()),
                    );
                    let mut out = CallOutcome::error(
                        ToolError::retry(format!("`{}` waits for a person's approval", tool.name)),
                        before,
                    );
                    out.input_required = Some(pending);
                    return out;
                }
                crate::approval::Asking::Refused(label, err) => {
                    audit.refuse(Refusal::Approval, Some(format!("{label}: {err}")));
                    return CallOutcome::error(err, before);
                }
            }
            pass = match self.state.enter(id).await {
                Ok(p) => p,
                Err(e) => return self.state_failure(audit, tool, e),
            };
            before = pass.level();
            audit.levels = (before, before);
            if let Err(refused) = self.admit(tool, before) {
                return self.refuse(audit, pass, tool, refused).await;
            }
        }
        // Step 1c: upstream tokens in the caller's name, only now (never in a question to a
        // person, nor in its digest).
        let mut args = args;
        if tool
            .bound
            .iter()
            .any(|b| b.claim.starts_with(bind::EXCHANGE))
        {
            let tokens = self.tokens.get().map(Arc::as_ref);
            if let Err(e) = Box::pin(bind::bind_upstream(
                tool,
                &mut args,
                id,
                ask.claims.as_ref(),
                tokens,
            ))
            .await
            {
                audit.failed(&e);
                self.state.leave(pass).await;
                return CallOutcome::error(e, before);
            }
            audit.bound(tool, &args);
        }
        // Step 2: an escalating call takes the pass exclusively, decides again on the level read
        // under it (re-admission), writes its intent, escalates, and keeps the pass shared.
        if tool.sensitivity > before {
            self.state.leave(pass).await;
            pass = match Box::pin(self.state.enter_exclusive(id)).await {
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
            if let Err(e) = Box::pin(audit.intent()).await {
                audit.levels = (now, now);
                return self.fail(audit, pass, e, now).await;
            }
            crate::failpoint!("call.escalate.after_intent");
            let dataset = dataset_name(tool, &args);
            let after =
                match Box::pin(self.state.escalate(&mut pass, &dataset, tool.sensitivity)).await {
                    Ok(level) => level,
                    Err(e) => return self.state_failure(audit, tool, e),
                };
            audit.levels = (now, after);
            if let Err(refused) = self.admit(tool, after) {
                return self.refuse(audit, pass, tool, refused).await;
            }
        } else if tool.permission == Permission::Connect {
            // A connect call: its intent is durable before anything leaves the process.
            if let Err(e) = Box::pin(audit.intent()).await {
                return self.fail(audit, pass, e, before).await;
            }
            crate::failpoint!("call.connect.after_intent");
        }
        // Step 3: the handler, under the pass.
        let level = pass.level();
        let result = self.run(id, tool, &pass, args, signals).await;
        crate::failpoint!("call.after_handler");
        let result = match result {
            Ok((out, found)) if !found.is_empty() => {
                // Boxed: the rare path, kept out of every call's future.
                return Box::pin(self.raise_for_findings(audit, id, tool, pass, out, found)).await;
            }
            Ok((out, _)) => Ok(out),
            Err(e) => Err(e),
        };
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
