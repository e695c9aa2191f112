//! What inspection decides in a call ([`crate::inspect`] finds, this decides): a `connect`
//! call whose arguments hold a credential is refused before anything leaves, and a result with
//! a finding raises its session to `secret` — intent written ahead, then the store — before the
//! (redacted) result is returned; if either write fails, the result is not sent.

use super::audit::CallAudit;
use super::{CallOutcome, Runtime};
use crate::audit::Outcome;
use crate::errors::ToolError;
use crate::identity::Identity;
use crate::inspect::Finding;
use crate::metrics::Refusal;
use crate::policy::{Permission, Sensitivity};
use crate::server::JsonObject;
use crate::state::Pass;
use crate::tooldef::ToolDef;

impl Runtime {
    /// The refusal of an inspected `connect` call whose arguments hold a credential: retryable,
    /// naming the argument and the rule, never the value.
    pub(super) fn credential_in_args(
        &self,
        tool: &ToolDef,
        args: &JsonObject,
    ) -> Option<(Refusal, ToolError)> {
        if tool.permission != Permission::Connect || !tool.inspection.is_on() {
            return None;
        }
        let f = crate::inspect::find_in_args(self.rules, args)?;
        Some((
            Refusal::Credential,
            ToolError::retry(format!(
                "`{}` was not sent: its argument `{}` holds what looks like a credential (rule `{}`); send it without the credential",
                tool.name, f.at, f.rule
            )),
        ))
    }

    /// Raises the session of a call whose result held credentials (already redacted in `out`)
    /// to `secret`, then returns `out` with the new level; if the raise cannot be written, an
    /// error instead (fail closed: the result is not sent).
    pub(super) async fn raise_for_findings(
        &self,
        audit: CallAudit<'_>,
        id: &Identity,
        tool: &ToolDef,
        pass: Pass,
        mut out: CallOutcome,
        found: Vec<Finding>,
    ) -> CallOutcome {
        match self.raise(audit, id, Some(pass), &found).await {
            Ok(after) => {
                tracing::warn!(tool = tool.name, found = %Finding::describe(&found), "credentials redacted from a result; the session is now {after}");
                out.level = after;
                out.required_mode = after.required_mode();
                out.found = found.iter().map(|f| f.rule).collect();
                out
            }
            Err(e) => CallOutcome::error(e, Sensitivity::Secret),
        }
    }

    /// Raises the session of a caller whose rendered prompt `name` held credentials (already
    /// redacted) to `secret`, audited as `prompt:<name>`; the new level, or why it could not
    /// be written (the prompt is then not sent).
    pub async fn raise_for_prompt(
        &self,
        id: &Identity,
        name: &str,
        found: &[Finding],
    ) -> Result<Sensitivity, ToolError> {
        let tool = format!("prompt:{name}");
        let audit = CallAudit::begin(self, id, &tool, Some(Permission::Read), None);
        self.raise(audit, id, None, found).await
    }

    /// The raise itself: an exclusive pass, the intent durable, the store at `secret`, the
    /// outcome recorded with what was found (rules and places, never values).
    async fn raise(
        &self,
        mut audit: CallAudit<'_>,
        id: &Identity,
        pass: Option<Pass>,
        found: &[Finding],
    ) -> Result<Sensitivity, ToolError> {
        let not_sent = |e: &dyn std::fmt::Display| {
            ToolError::fatal(format!(
                "{e}, so this result, which held credentials, is not sent"
            ))
        };
        if let Some(pass) = pass {
            self.state.leave(pass).await;
        }
        let mut pass = match self.state.enter_exclusive(id).await {
            Ok(p) => p,
            Err(e) => {
                let err = not_sent(&e.for_model());
                audit.refuse(Refusal::State, Some(e.to_string()));
                return Err(err);
            }
        };
        let now = pass.level();
        audit.levels = (audit.levels.0.min(now), Sensitivity::Secret);
        if let Err(e) = audit.intent().await {
            audit.levels.1 = now;
            self.metrics.refused(Refusal::Audit);
            audit.failed(&e);
            self.state.leave(pass).await;
            return Err(e);
        }
        crate::failpoint!("call.found.after_intent");
        let dataset = format!("found:{}", found[0].rule);
        let after = match self
            .state
            .escalate(&mut pass, &dataset, Sensitivity::Secret)
            .await
        {
            Ok(level) => level,
            Err(e) => {
                let err = not_sent(&e.for_model());
                audit.refuse(Refusal::State, Some(e.to_string()));
                return Err(err);
            }
        };
        audit.levels.1 = after;
        audit.finish(
            Outcome::Escalated,
            Some(format!(
                "credentials redacted: {}",
                Finding::describe(found)
            )),
        );
        self.state.leave(pass).await;
        Ok(after)
    }
}
