//! Prometheus metrics of one server process (`GET /metrics`, OpenMetrics text): tool calls by
//! tool and outcome, call latency, refusals by reason, escalations by level, connector errors,
//! open transport sessions. Labels carry only names Bulkhead declares (tools, connectors,
//! outcomes, reasons, levels) — never arguments, identities or paths — so their number is bounded
//! by the spec, not by callers. Recorded in one place: [`crate::call`]'s audit step.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// `tool` and `outcome` (`allowed`, `escalated`, `blocked`, `error`, `cancelled`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LevelLabel {
    level: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectorLabel {
    connector: String,
}

/// Why a call was refused (the `reason` label of `bulkhead_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// This instance's network mode cannot serve the session's level.
    Mode,
    /// A `connect` tool in a session holding private data.
    ConnectBlocked,
    /// `limits.max_concurrent_calls` reached.
    Busy,
    /// The compliance state could not be read or written (fail closed).
    State,
    /// The audit log could not be written (fail closed).
    Audit,
    /// The token lacks the scope the tool's permission requires.
    Scope,
    /// The instance failed its isolation self-check.
    Isolation,
    /// A rate limit was used up, or could not be counted (`bulkhead_rate_limited` says which).
    RateLimit,
    /// A tool's approval was not given (declined, expired, no way to ask, a bad answer).
    Approval,
    /// A `connect` call's arguments held a credential ([`crate::inspect`]).
    Credential,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Mode => "mode",
            Refusal::ConnectBlocked => "connect_blocked",
            Refusal::Busy => "busy",
            Refusal::State => "state_unavailable",
            Refusal::Audit => "audit_unavailable",
            Refusal::Scope => "scope",
            Refusal::Isolation => "isolation",
            Refusal::RateLimit => "rate_limit",
            Refusal::Approval => "approval",
            Refusal::Credential => "credential",
        }
    }
}

/// The metrics of one process.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabel, Histogram, fn() -> Histogram>,
    refusals: Family<ReasonLabel, Counter>,
    escalations: Family<LevelLabel, Counter>,
    connector_errors: Family<ConnectorLabel, Counter>,
    rate_limited: Family<LimitLabel, Counter>,
    approvals: Family<ApprovalLabel, Counter>,
    sessions: Gauge,
    parked: Gauge,
}

/// What became of an approval (`asked`, `given`, `declined`, `expired`, `refused`: bounded).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApprovalLabel {
    result: &'static str,
}

/// Which rate limit refused (a name from the configuration: bounded).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: &'static str,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn latency_buckets() -> Histogram {
    // 0.5 ms … ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// An empty set of metrics, registered under the `bulkhead_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("bulkhead");
        let calls = Family::<CallLabels, Counter>::default();
        let latency = Family::<ToolLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_buckets,
        );
        let refusals = Family::<ReasonLabel, Counter>::default();
        let escalations = Family::<LevelLabel, Counter>::default();
        let connector_errors = Family::<ConnectorLabel, Counter>::default();
        let sessions = Gauge::default();
        let parked = Gauge::default();
        let rate_limited = Family::<LimitLabel, Counter>::default();
        let approvals = Family::<ApprovalLabel, Counter>::default();
        registry.register(
            "approvals",
            "Approvals of tool calls, by result (asked, given, declined, expired, refused)",
            approvals.clone(),
        );
        registry.register(
            "rate_limited",
            "Calls refused by a rate limit, by limit (`store`: the limits could not be counted)",
            rate_limited.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls by tool and outcome",
            calls.clone(),
        );
        registry.register_with_unit(
            "tool_call_duration",
            "Tool call latency, from admission to result",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register("refusals", "Calls refused, by reason", refusals.clone());
        registry.register(
            "escalations",
            "Sessions raised, by the level reached",
            escalations.clone(),
        );
        registry.register(
            "connector_errors",
            "Connector operations that failed (not bad input), by connector",
            connector_errors.clone(),
        );
        registry.register(
            "open_sessions",
            "Open MCP transport sessions",
            sessions.clone(),
        );
        registry.register(
            "parked_sessions",
            "Open MCP transport sessions that are parked (no rmcp worker; restored on their next request)",
            parked.clone(),
        );
        Metrics {
            registry,
            calls,
            latency,
            refusals,
            escalations,
            connector_errors,
            rate_limited,
            approvals,
            sessions,
            parked,
        }
    }

    /// Records what became of an approval.
    pub fn approval(&self, result: &'static str) {
        self.approvals
            .get_or_create(&ApprovalLabel { result })
            .inc();
    }

    /// Records a call refused by a rate limit (`limit`: its configured name, or `store`).
    pub fn rate_limited(&self, limit: &'static str) {
        self.rate_limited.get_or_create(&LimitLabel { limit }).inc();
    }

    /// Records a finished call.
    pub fn call(&self, tool: &str, outcome: &'static str, took: Duration) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                outcome,
            })
            .inc();
        self.latency
            .get_or_create(&ToolLabel {
                tool: tool.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// Records a refusal.
    pub fn refused(&self, why: Refusal) {
        self.refusals
            .get_or_create(&ReasonLabel {
                reason: why.label(),
            })
            .inc();
    }

    /// Records an escalation to `level`.
    pub fn escalated(&self, level: &'static str) {
        self.escalations.get_or_create(&LevelLabel { level }).inc();
    }

    /// Records a failed connector operation.
    pub fn connector_error(&self, connector: &str) {
        self.connector_errors
            .get_or_create(&ConnectorLabel {
                connector: connector.to_owned(),
            })
            .inc();
    }

    /// Sets the number of open transport sessions (read at scrape time).
    pub fn set_sessions(&self, n: usize) {
        self.sessions.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Sets how many of the open transport sessions are parked.
    pub fn set_parked(&self, n: usize) {
        self.parked.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The `Content-Type` of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
