//! Admission: whether a call may run (the static gates, then the level read under its pass on
//! this instance), and how each refusal is recorded and answered.

use super::audit::CallAudit;
use super::{CallOutcome, Runtime};
use crate::auth::Grants;
use crate::errors::ToolError;
use crate::identity::Identity;
use crate::metrics::Refusal;
use crate::policy::{Permission, Sensitivity};
use crate::state::{Pass, StateError};
use crate::tooldef::ToolDef;

impl Runtime {
    /// The checks that need no state, in order: a free call slot (beyond the limit a call is
    /// refused at once, retryable, never queued), the token scope the permission requires, and
    /// this instance's isolation. The permit is the call's slot.
    pub(super) fn gate(
        &self,
        tool: &ToolDef,
        grants: &Grants,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, (Refusal, ToolError)> {
        let Ok(permit) = self.calls.try_acquire() else {
            return Err((
                Refusal::Busy,
                ToolError::retry(format!(
                    "the server is busy: {} tool calls are running, its limit (limits.max_concurrent_calls); retry in a moment",
                    self.max_calls
                )),
            ));
        };
        if let Some(need) = self.scopes.for_permission(tool.permission)
            && !grants.has(need)
        {
            return Err((
                Refusal::Scope,
                ToolError::fatal(format!(
                    "`{}` needs the scope `{need}` (auth.scopes.{}), which this token does not grant; get a token with that scope",
                    tool.name,
                    tool.permission.as_str()
                )),
            ));
        }
        if let Some(why) = self.isolation.broken_because() {
            return Err((
                Refusal::Isolation,
                ToolError::fatal(format!(
                    "this `{}` instance failed its isolation check ({why}), so it runs no tool until that is fixed",
                    self.mode
                )),
            ));
        }
        Ok(permit)
    }

    /// Counts one call of `name` (a tool, `resource:…`, `prompt:…`) by the caller against the
    /// rate limits (see [`crate::ratelimit`]); a refusal is retryable and says which limit and
    /// when to retry.
    pub(crate) async fn count(
        &self,
        id: &Identity,
        name: &str,
        own: Option<bulkhead_vocab::RateLimit>,
    ) -> Result<(), (Refusal, ToolError)> {
        let subject = crate::ratelimit::Subject {
            user: id.user(),
            tool: name,
            own,
        };
        self.rates.take(subject).await.map_err(|refused| {
            if let crate::ratelimit::RateRefusal::Store(e) = &refused {
                tracing::error!(error = %e, "rate limits cannot be counted; call refused");
            }
            self.metrics.rate_limited(refused.label());
            (
                Refusal::RateLimit,
                ToolError::retry(refused.for_caller(name)),
            )
        })
    }

    /// Counts a prompt get against the rate limits (prompts run nothing, but a client can call
    /// them as fast as tools).
    pub async fn count_prompt(&self, id: &Identity, prompt: &str) -> Result<(), ToolError> {
        self.count(id, &format!("prompt:{prompt}"), None)
            .await
            .map_err(|(_, e)| e)
    }

    /// A call refused by [`gate`](Runtime::gate), before it holds a pass: recorded at the
    /// session's current level (read for the report only).
    pub(super) async fn refuse_ungated(
        &self,
        mut audit: CallAudit<'_>,
        id: &Identity,
        (why, err): (Refusal, ToolError),
    ) -> CallOutcome {
        let level = self.state.peek(id).await;
        audit.levels = (level, level);
        audit.refuse(why, Some(err.to_string()));
        CallOutcome::error(err, level)
    }

    /// Whether the call may run with the session at `level`, on this instance.
    pub(super) fn admit(
        &self,
        tool: &ToolDef,
        level: Sensitivity,
    ) -> Result<(), (Refusal, ToolError)> {
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
                    bulkhead_lang::emit::deploy::clients::url_key(want)
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

    /// A refused call: recorded, pass given back, the instance the session needs in `_meta`.
    pub(super) async fn refuse(
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
    pub(super) async fn fail(
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
    pub(super) fn state_failure(
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
}
