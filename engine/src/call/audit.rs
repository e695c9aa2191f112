//! One call's audit trail: the write-ahead intent, exactly one outcome, and the metrics and span
//! every outcome passes through.

use super::Runtime;
use crate::audit::{ArgsSummary, AuditLog, AuditRecord, Outcome, Phase, new_call_id};
use crate::errors::ToolError;
use crate::identity::Identity;
use crate::metrics::{Metrics, Refusal};
use crate::policy::{Permission, Sensitivity};
use crate::server::JsonObject;

/// One call's audit trail: the intent (when written ahead) and exactly one outcome. Dropped before
/// [`finish`](CallAudit::finish) (the caller went away and the call future was dropped), it records
/// the outcome `cancelled`.
pub(super) struct CallAudit<'a> {
    log: &'a AuditLog,
    metrics: &'a Metrics,
    server: &'a str,
    started: std::time::Instant,
    started_at: std::time::SystemTime,
    pub(super) call: String,
    id: &'a Identity,
    tool: &'a str,
    permission: Option<Permission>,
    args: ArgsSummary,
    /// The arguments' values, to keep them out of every detail and log line.
    redact: crate::audit::Redactor,
    /// The session level before and after the call, as far as it got.
    pub(super) levels: (Sensitivity, Sensitivity),
    done: bool,
}

impl<'a> CallAudit<'a> {
    /// Starts the trail of one call of `tool` on `rt`'s server (`permission` is `None` for a
    /// name the server does not have); the levels are filled in as the call learns them.
    pub(super) fn begin(
        rt: &'a Runtime,
        id: &'a Identity,
        tool: &'a str,
        permission: Option<Permission>,
        args: Option<&JsonObject>,
    ) -> CallAudit<'a> {
        CallAudit {
            log: &rt.audit,
            metrics: &rt.metrics,
            server: rt.server.def.name,
            started: std::time::Instant::now(),
            started_at: std::time::SystemTime::now(),
            call: new_call_id(),
            id,
            tool,
            permission,
            args: ArgsSummary::of(args),
            redact: crate::audit::Redactor::of(args),
            levels: (Sensitivity::Public, Sensitivity::Public),
            done: false,
        }
    }

    /// Records the values of `tool`'s parameters bound to the caller's token (never the token).
    pub(super) fn bound(&mut self, tool: &crate::tooldef::ToolDef, args: &JsonObject) {
        for b in tool.bound {
            let Some(v) = args.get(b.param).and_then(|v| v.as_str()) else {
                continue;
            };
            // Kept out of every detail and log line, as the model's arguments are.
            self.redact.also(v);
            // An upstream token is named by its audience and id, never written.
            let shown = match b.claim.strip_prefix(super::bind::EXCHANGE) {
                Some(audience) => {
                    let claims = crate::sessions::unverified_claims(v);
                    crate::audit::cut_name(&format!(
                        "token for {audience} (jti {})",
                        claims["jti"].as_str().unwrap_or("none")
                    ))
                }
                None => crate::audit::cut_name(v),
            };
            self.args
                .bound
                .insert(crate::audit::cut_name(b.param), shown);
        }
    }

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
    pub(super) async fn intent(&self) -> Result<(), ToolError> {
        let rec = self.record(Phase::Intent, None, None);
        self.log.append_durable(&rec).await.map_err(|e| {
            tracing::error!(call = %self.call, error = %e, "write-ahead audit failed; call refused");
            ToolError::fatal(format!("{}, so this call is refused", e.for_model()))
        })
    }

    /// Records a person's approval (`detail`: who answered, how, when) and waits until it is
    /// durable: no call runs on an approval the audit could lose.
    pub(super) async fn approved(&self, detail: String) -> Result<(), ToolError> {
        let rec = self.record(Phase::Approval, None, Some(self.redact.apply(&detail)));
        self.log.append_durable(&rec).await.map_err(|e| {
            tracing::error!(call = %self.call, error = %e, "approval audit failed; call refused");
            ToolError::fatal(format!("{}, so this call is refused", e.for_model()))
        })
    }

    /// A failed call. A failure the model cannot fix (fatal, a bug) is also logged at warn
    /// (rate-limited). Neither the log line nor the audit detail carries argument values
    /// ([`crate::audit::Redactor`]).
    pub(super) fn failed(self, err: &ToolError) {
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
    pub(super) fn finish(mut self, outcome: Outcome, detail: Option<String>) {
        self.done = true;
        let detail = detail.map(|d| self.redact.apply(&d));
        self.observe(outcome);
        let rec = self.record(Phase::Outcome, Some(outcome), detail);
        if let Err(e) = self.log.append(&rec) {
            tracing::error!(call = %self.call, error = %e, "audit append failed");
        }
    }

    /// A refusal: recorded with its reason.
    pub(super) fn refuse(self, why: Refusal, detail: Option<String>) {
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
