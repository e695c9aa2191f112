//! `specs/connectors/*.yaml`: data operations that tools wrap. No MCP in here.

use super::{ParamSpec, Sensitivity};
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
    /// The operations, by name.
    pub operations: BTreeMap<String, OperationSpec>,
}

/// Built-in connector kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConnectorKind {
    /// Files in the caller's workspace.
    Files,
    /// An SQLite database with named, parameterised SQL.
    Sqlite,
    /// An HTTP API under a declared base URL (reaches the network).
    Http,
    /// A directory of log files searched with regexes.
    Logs,
    /// A PostgreSQL database with named, parameterised SQL (reads in read-only transactions).
    Postgres,
    /// A program run in a per-session jail (bubblewrap) over the session's workspace.
    Sandbox,
    /// An MCP server nobody here wrote (stdio or Streamable HTTP): only the tools a spec
    /// declares, each pinned by the hash of its definition in a reviewed lock.
    Mcp,
}

impl ConnectorKind {
    /// The spec spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorKind::Files => "files",
            ConnectorKind::Sqlite => "sqlite",
            ConnectorKind::Http => "http",
            ConnectorKind::Logs => "logs",
            ConnectorKind::Postgres => "postgres",
            ConnectorKind::Sandbox => "sandbox",
            ConnectorKind::Mcp => "mcp",
        }
    }
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
    /// `sandbox`: the program and its arguments; an argument that is exactly `{param}` is
    /// replaced by that parameter's value (the program itself is never a parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// `mcp`: the upstream tool this operation calls (pinned in the connector's lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// Built-in actions of the `files` and `logs` kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileAction {
    /// Read one file (`path`).
    Read,
    /// Write one file (`path`, `content`).
    Write,
    /// List files (`path`, `pattern`).
    List,
    /// Search with a regex (`pattern`, `path`, `context_lines`, and for logs `since`/`until`).
    Search,
}

impl FileAction {
    /// The spec spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FileAction::Read => "read",
            FileAction::Write => "write",
            FileAction::List => "list",
            FileAction::Search => "search",
        }
    }
}

/// HTTP methods an `http` operation may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// PATCH
    Patch,
    /// DELETE
    Delete,
}

/// A count written as a number or as text (settings often come from `${VAR:-5000}`).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Count {
    /// A whole number.
    Number(u64),
    /// Text holding a whole number, or a `${VAR}` expression that expands to one.
    Text(String),
}

/// Settings of a `files` connector: none (it works in the caller's own workspace).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesSettings {}

/// Settings of a `sqlite` connector.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqliteSettings {
    /// Path of the database file (reads open it read-only; nothing creates it).
    pub path: String,
    /// Milliseconds to wait for a lock held by another writer (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_timeout_ms: Option<Count>,
}

/// Settings of an `http` connector.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// The service's base URL (`https://…`; `http://` only for loopback and tests).
    pub base_url: String,
    /// `host:port` pairs the connector may reach (default: the base URL's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_hosts: Option<Vec<String>>,
    /// Milliseconds before a request is abandoned (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<Count>,
    /// Largest response body read, in bytes (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<Count>,
    /// Headers sent with every request (use `${VAR}` for credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// PEM file of the certificate authorities trusted for `https://` (default: the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

/// Settings of a `postgres` connector.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresSettings {
    /// Connection URL, `postgres://user@host:port/db` (keep the password in a `secrets:` variable).
    pub url: String,
    /// Milliseconds to wait for a connection (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<Count>,
    /// Milliseconds a statement may run before the server cancels it (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement_timeout_ms: Option<Count>,
    /// Connections kept open per instance (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<Count>,
}

/// Settings of a `logs` connector.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsSettings {
    /// Folder whose log files are searched (not its subfolders).
    pub dir: String,
}

/// Settings of a `sandbox` connector: the limits of one run (each has a safe default).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// CPU seconds one run may use (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<Count>,
    /// Seconds one run may take, start to end (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<Count>,
    /// Memory one run may use, in MiB (default 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<Count>,
    /// Processes (and threads) one run may have at once (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Count>,
    /// Bytes of output (stdout and stderr together) one run may print (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<Count>,
    /// Largest file one run may write, in bytes (default 64 MiB; the workspace quota also applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_bytes: Option<Count>,
    /// Runs of this connector at once in one instance (default 8); more wait for a slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<Count>,
    /// `host:port` entries a run may reach, through the instance's egress (on `full` and
    /// `proxied`); without it a run has no network at all. Every tool over a connector with
    /// `egress` must be `permission: connect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
}

/// Settings of an `mcp` connector: how the upstream is reached, and its bounds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// Launch over stdio: the program and its arguments (run by the instance that runs the
    /// tools, in a jail of its own inside the instance's network; relative paths start at
    /// `/tmp`, or `/workspace` for an upstream of one session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Variables the launched program gets (nothing else of the server's environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Reach over Streamable HTTP instead (`https://…`; `http://` only for loopback and tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every request to `url` (use `${VAR}` for credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Milliseconds the upstream may take to start and answer `initialize` (default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timeout_ms: Option<Count>,
    /// Milliseconds one call may take (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<Count>,
    /// Largest message the upstream may send, in bytes (default 4 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<Count>,
    /// Most tools the upstream may list (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<Count>,
    /// Host folders a launched upstream reads (absolute; visible read-only at the same path in
    /// its jail, besides the system and its own install folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<String>,
    /// Host folders a launched upstream may write (absolute; same path in its jail).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_write: Vec<String>,
    /// One upstream per session, with that session's folder at `/workspace` (for upstreams
    /// that take a root folder, such as the filesystem server); default: one per instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_workspace: Option<bool>,
    /// Upstreams of sessions running at once (default 16); the least recently used idle one is
    /// stopped to make room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<Count>,
    /// Seconds a session's upstream may sit without a call before it is stopped (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<Count>,
    /// Memory one launched upstream with everything it starts may use, in MiB (default 1024;
    /// where the server can make cgroups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<Count>,
    /// `host:port` entries a launched upstream may reach, through the instance's egress (on
    /// `full` and `proxied`); without it the upstream has no network at all. Every tool over a
    /// connector with `egress` must be `permission: connect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    /// Processes one launched upstream may run at once (default 256; where the server can make
    /// cgroups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Count>,
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
