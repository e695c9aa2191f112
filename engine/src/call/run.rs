//! Step 3 of a call: the handler (or connector) under the pass, caught if it panics, its result
//! redacted of credentials and shaped by the context preset, and checked against the declared
//! output schema. What was found goes back to the pipeline, which raises the session.

use super::{CallOutcome, Runtime, output};
use crate::connectors::sandbox::{EscalationWatch, JailContext};
use crate::errors::ToolError;
use crate::identity::{self, Identity};
use crate::server::BoxFuture;
use crate::server::{JsonObject, ToolContext};
use crate::signals::CallSignals;
use crate::state::{Pass, StateStore};
use crate::tooldef::{Target, ToolDef};
use crate::workspace::LazyWorkspace;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;

impl Runtime {
    pub(super) async fn run(
        &self,
        id: &Identity,
        tool: &'static ToolDef,
        pass: &Pass,
        args: JsonObject,
        signals: &CallSignals,
    ) -> Result<(CallOutcome, Vec<crate::inspect::Finding>), ToolError> {
        let level = pass.level();
        let watch = PassWatch {
            state: &self.state,
            pass,
        };
        let jail = JailContext {
            mode: self.mode,
            watch: &watch,
        };
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
                    crate::connectors::call_in(
                        &self.connectors,
                        connector,
                        operation,
                        &workspace,
                        args,
                        &jail,
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
        let how = output::Shaping {
            preset,
            level,
            key,
            rules: tool.inspection.is_on().then_some(self.rules),
        };
        let mut found = Vec::new();
        let out = output::shape(how, &workspace, tool, output, signals, &mut found).await?;
        Ok((self.check_declared(tool, out)?, found))
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

/// Sees, through the call's own pass, that a call waits to escalate its session.
struct PassWatch<'a> {
    state: &'a StateStore,
    pass: &'a Pass,
}

impl EscalationWatch for PassWatch<'_> {
    fn waiting(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match self.state.escalation_waiting(self.pass).await {
                Ok(waiting) => waiting,
                Err(e) => {
                    // Fail closed: a run that cannot tell stops.
                    tracing::warn!(error = %e, "cannot tell whether the session escalates; stopping the run");
                    true
                }
            }
        })
    }
}
