//! `specs/connectors/*.yaml`: data operations that tools wrap. No MCP in here.

use super::{ParamSpec, Sensitivity};
pub use bulkhead_vocab::connector::{
    ConnectorKind, Count, FileAction, FilesSettings, HttpMethod, HttpSettings, LogsSettings,
    McpSettings, PostgresSettings, SandboxSettings, SqliteSettings,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A connector: one backend of one kind and the named operations on it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectorSpec {
    /// Connector name, referenced by tools as `name.operation`.
    pub name: String,
    /// The backend kind.
    pub kind: ConnectorKind,
    /// What this connector is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The least sensitivity of what this connector reads: tools using it must declare at least this.
    pub sensitivity: Sensitivity,
    /// Kind-specific settings; strings may use `${VAR}`, `${VAR:-default}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
    /// Environment variables in `settings` that carry credentials. Deployments pass them as files
    /// (compose `secrets:`, read through `<VAR>_FILE`), never as inline values; none may have a
    /// non-empty default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Turns off reading the results of every tool over this connector for credentials (a
    /// tool's own `uninspected:` has the same effect for that tool), for the reason given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninspected: Option<String>,
    /// The operations, by name.
    pub operations: BTreeMap<String, OperationSpec>,
}

/// One operation. Which fields apply depends on the connector kind.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationSpec {
    /// What the operation does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `files` and `logs`: which built-in action this is (its parameters are implied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<FileAction>,
    /// Parameters (`sqlite`, `http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<BTreeMap<String, ParamSpec>>,
    /// `sqlite`: one SQL statement with `:name` placeholders for the parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// `http`: the method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<HttpMethod>,
    /// `http`: path under the base URL, with `{param}` placeholders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `http`: parameters sent as query string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Vec<String>>,
    /// `http`: parameters sent as a JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Vec<String>>,
    /// `http`: parameters sent as request headers (their `upstream` names the header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<String>>,
    /// `http`: the JSON Schema (an object) of the service's answer. Tools over the operation
    /// declare it as their `outputSchema`; an answer that does not match it is not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<serde_json::Value>,
    /// `sandbox`: the program and its arguments; an argument that is exactly `{param}` is
    /// replaced by that parameter's value (the program itself is never a parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// `mcp`: the upstream tool this operation calls (pinned in the connector's lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// The lock of an `mcp` connector (`<connector>.lock.json` beside its spec): who the upstream
/// is and, per upstream tool, the hash of its canonical definition. Written by `bulkhead mcp
/// lock`, reviewed in pull requests like the compose files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpLock {
    /// The upstream's `serverInfo`: `name@version`.
    pub server: String,
    /// The package it comes from, at its exact version (e.g. `pypi:mcp-server-time==2026.10.19`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Each pinned tool, by upstream tool name.
    pub tools: BTreeMap<String, LockedTool>,
}

/// One pinned upstream tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedTool {
    /// `sha256:<hex>` of the canonical text of `definition`.
    pub pin: String,
    /// The definition as reviewed: name, title, description, input and output schema,
    /// annotations (keys sorted).
    pub definition: serde_json::Value,
}
