//! Static descriptions of tools, connectors and deployments, as generated code declares them.

use crate::policy::{Permission, Sensitivity};
pub use bulkhead_vocab::{Approval, ApprovalCondition, Approver, RateLimit};

/// A context preset declared in a server spec: a built-in one with some numbers overridden.
#[derive(Debug)]
pub struct PresetDef {
    /// Preset name.
    pub name: &'static str,
    /// The built-in preset it starts from.
    pub based_on: &'static str,
    /// Overridden fields and values.
    pub overrides: &'static [(&'static str, u64)],
}

/// A tool: the three declared properties, its schema, and what it runs.
#[derive(Debug)]
pub struct ToolDef {
    /// MCP tool name.
    pub name: &'static str,
    /// Human title.
    pub title: Option<&'static str>,
    /// Description for the model.
    pub description: &'static str,
    /// Declared permission.
    pub permission: Permission,
    /// Context preset name.
    pub context: &'static str,
    /// Declared sensitivity.
    pub sensitivity: Sensitivity,
    /// Annotations derived from the permission.
    pub annotations: Annotations,
    /// `inputSchema` as JSON text.
    pub input_schema: &'static str,
    /// The declared result's JSON Schema (`outputSchema`), when the tool declares one.
    pub output_schema: Option<&'static str>,
    /// Dataset name template recorded when the call raises the session.
    pub dataset: &'static str,
    /// The tool's own per-user rate limit (replaces `rate_limits.per_user_tool`).
    pub rate_limit: Option<RateLimit>,
    /// When a person approves a call before it runs, and who (see [`crate::approval`]).
    pub approval: Option<Approval>,
    /// Whether its results (and, for `connect`, its arguments) are read for credentials.
    pub inspection: Inspection,
    /// Parameters set from the caller's token, never by the model (see [`crate::call`]).
    pub bound: &'static [Bound],
    /// What runs.
    pub target: Target,
}

/// Whether a tool's data is read for credentials ([`crate::inspect`]): on unless its spec (or
/// its connector's) says `uninspected:` with a reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inspection {
    /// Results are redacted and raise the session; `connect` arguments are refused.
    On,
    /// Not read, for the reason the spec gives.
    Off {
        /// Why (the spec's `uninspected:`).
        reason: &'static str,
    },
}

impl Inspection {
    /// Whether inspection is on.
    pub fn is_on(self) -> bool {
        self == Inspection::On
    }
}

/// A parameter set from a claim of the caller's token (`from_claim:` in the spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The parameter.
    pub param: &'static str,
    /// The claim (`sub`, or one the token carries, e.g. `email`).
    pub claim: &'static str,
}

/// MCP tool annotations, derived from the permission by the generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annotations {
    /// `readOnlyHint`
    pub read_only: bool,
    /// `destructiveHint`
    pub destructive: bool,
    /// `idempotentHint`
    pub idempotent: bool,
    /// `openWorldHint`
    pub open_world: bool,
}

/// What a tool runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A connector operation.
    Connector {
        /// Connector name.
        connector: &'static str,
        /// Operation name.
        operation: &'static str,
    },
    /// A user-written Rust handler.
    Handler,
    /// Fixed text (a resource's `text:`).
    Static(&'static str),
}

/// A connector as declared in `specs/connectors/`.
#[derive(Debug)]
pub struct ConnectorDef {
    /// Name.
    pub name: &'static str,
    /// Its kind (the generator checked its settings against the kind's type).
    pub kind: bulkhead_vocab::connector::ConnectorKind,
    /// Least sensitivity of what it reads.
    pub sensitivity: Sensitivity,
    /// Settings as JSON text (strings may hold `${VAR}`; expanded at start).
    pub settings: &'static str,
    /// Variables of `settings` that carry credentials (read from `<VAR>_FILE` in every
    /// generated deployment; one set plainly is warned about at start).
    pub secrets: &'static [&'static str],
    /// Operations.
    pub operations: &'static [OperationDef],
}

impl ConnectorDef {
    /// An operation by name.
    pub fn operation(&self, name: &str) -> Option<&'static OperationDef> {
        self.operations.iter().find(|o| o.name == name)
    }
}

/// A connector operation.
#[derive(Debug)]
pub struct OperationDef {
    /// Name.
    pub name: &'static str,
    /// JSON Schema of its parameters.
    pub params_schema: &'static str,
    /// What it does: the vocabulary's `OperationBody` as JSON (read once at start).
    pub body: &'static str,
}

/// A deployment: which servers run, on which port, with which egress allowlists.
#[derive(Debug)]
pub struct DeploymentDef {
    /// Deployment name.
    pub name: &'static str,
    /// Servers, sorted by name.
    pub servers: &'static [DeployedServerDef],
}

/// One server in a deployment.
#[derive(Debug)]
pub struct DeployedServerDef {
    /// Server name.
    pub name: &'static str,
    /// Port every instance listens on.
    pub port: u16,
    /// `host:port` the full instance is expected to reach (informational).
    pub egress: &'static [&'static str],
    /// `host:port` the proxied instance may reach; nothing else.
    pub proxied_egress: &'static [&'static str],
    /// Private ranges (CIDR) its allowlisted names may resolve to.
    pub internal_ranges: &'static [&'static str],
    /// The highest sensitivity its tools reach: decides which instances exist.
    pub max_sensitivity: Sensitivity,
}

impl DeployedServerDef {
    /// The network modes this server needs instances for, least isolated first.
    pub fn modes(&self) -> Vec<crate::policy::NetworkMode> {
        crate::policy::NetworkMode::needed_for(self.max_sensitivity).collect()
    }
}
