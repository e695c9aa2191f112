//! Connectors: data operations behind tools. No MCP or HTTP-server types in here; the wrapper in
//! `call` applies every policy before and after.
//!
//! [`Connectors`] is built once at start from the generated [`ConnectorDef`]s: settings are
//! expanded (`${VAR}`, `${VAR:-default}`) and parsed, and each connector keeps its resources (a
//! database path, an HTTP client, a log directory). [`call`] runs one operation.

#[cfg(feature = "fixture-kind")]
mod echo;
mod files;
mod grep;
mod http;
mod logs;
pub mod mcp;
mod postgres;
mod public_only;
pub mod sandbox;
mod settings;
mod sqlite;
mod stream;
pub use stream::StreamBudget;

use std::collections::HashMap;

use crate::errors::ToolError;
use crate::server::{JsonObject, ToolResult};
use crate::signals::CallSignals;
use crate::tooldef::ConnectorDef;
use crate::workspace::WorkspaceSource;
use bulkhead_vocab::connector::OperationBody;
use bulkhead_vocab::connector::Settings;

/// Why the connectors could not be built (a bad or missing setting).
#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    /// A setting is missing, malformed or fails `${VAR}` expansion.
    #[error("connector `{connector}`: {reason}")]
    Settings {
        /// Connector name.
        connector: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// One operation of a built connector: its generated definition and its body.
pub struct Operation {
    def: &'static crate::tooldef::OperationDef,
    body: OperationBody,
}

/// One built connector.
enum Instance {
    Files,
    Sqlite(sqlite::Sqlite),
    Postgres(postgres::Postgres),
    Http(http::Http),
    Logs(logs::Logs),
    Sandbox(sandbox::Sandbox),
    Mcp(Box<mcp::Mcp>),
    #[cfg(feature = "fixture-kind")]
    Echo(echo::Echo),
}

/// One connector as built at start: its definition, its settings as expanded (what its facts
/// are read from), its operations with their bodies, and what runs them.
struct Built {
    def: &'static ConnectorDef,
    settings: Settings,
    operations: Vec<Operation>,
    instance: Instance,
}

/// Every connector a server uses, built once from its definitions and the environment.
pub struct Connectors {
    by_name: HashMap<&'static str, Built>,
    budget: stream::StreamBudget,
}

impl std::fmt::Debug for Connectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.by_name.keys().collect();
        names.sort();
        f.debug_struct("Connectors").field("names", &names).finish()
    }
}

impl Connectors {
    /// Builds the connectors in `defs`, expanding `${VAR}` in their settings through `env`.
    pub fn new(
        defs: impl IntoIterator<Item = &'static ConnectorDef>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Connectors, ConnectorError> {
        let mut by_name = HashMap::new();
        for def in defs {
            let settings = settings::typed(def, env)?;
            let ops = def
                .operations
                .iter()
                .map(|op| {
                    serde_json::from_str(op.body)
                        .map(|body| Operation { def: op, body })
                        .map_err(|e| ConnectorError::Settings {
                            connector: def.name,
                            reason: format!(
                                "operation `{}` is not one this runtime knows: {e}",
                                op.name
                            ),
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let instance = match settings.clone() {
                Settings::Files(_) => Instance::Files,
                Settings::Sqlite(s) => Instance::Sqlite(sqlite::Sqlite::new(def, s)?),
                Settings::Postgres(s) => Instance::Postgres(postgres::Postgres::new(def, s, &ops)?),
                Settings::Http(s) => Instance::Http(http::Http::new(def, s)?),
                Settings::Logs(s) => Instance::Logs(logs::Logs::new(def, s)?),
                Settings::Sandbox(s) => Instance::Sandbox(sandbox::Sandbox::new(def, s, env)?),
                Settings::Mcp(s) => Instance::Mcp(Box::new(mcp::Mcp::new(def, s, &ops, env)?)),
                #[cfg(feature = "fixture-kind")]
                Settings::Echo(s) => Instance::Echo(echo::Echo::new(s)),
            };
            by_name.insert(
                def.name,
                Built {
                    def,
                    settings,
                    operations: ops,
                    instance,
                },
            );
        }
        Ok(Connectors {
            by_name,
            budget: stream::StreamBudget::default(),
        })
    }

    /// Under a root server (`owner` is `Some`), launched upstreams write their `read_write`
    /// folders through idmapped views, as that owner's user ([`HostOwner`](crate::workspace::HostOwner)).
    pub fn with_host_owner(
        mut self,
        owner: Option<std::sync::Arc<crate::workspace::HostOwner>>,
    ) -> Connectors {
        for built in self.by_name.values_mut() {
            if let Instance::Mcp(m) = &mut built.instance {
                m.set_host_owner(owner.clone());
            }
        }
        self
    }

    /// The memory budget of each call's streamed result.
    pub(crate) fn budget(&self) -> stream::StreamBudget {
        self.budget
    }

    /// Sets the memory budget of each call's streamed result.
    pub fn with_budget(mut self, budget: stream::StreamBudget) -> Connectors {
        self.budget = budget;
        self
    }

    /// Builds the connectors in `defs` with the process environment.
    pub fn from_env(
        defs: impl IntoIterator<Item = &'static ConnectorDef>,
    ) -> Result<Connectors, ConnectorError> {
        Connectors::new(defs, &crate::config::env_lookup)
    }

    /// The files and folders the connectors read on this host, by connector and setting.
    pub fn data_paths(&self) -> Vec<(&'static str, &'static str, &std::path::Path)> {
        let mut out: Vec<_> = self
            .by_name
            .iter()
            .flat_map(|(name, b)| {
                b.settings
                    .data_paths()
                    .into_iter()
                    .filter(|p| p.holds_data)
                    .map(|p| (*name, p.setting, std::path::Path::new(p.written)))
            })
            .collect();
        out.sort_by_key(|(n, s, _)| (*n, *s));
        out
    }

    /// Whether a connector of this name was built.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Readiness of each connector, by name: a SQLite database opens read-only and answers, a
    /// log directory can be listed. HTTP connectors are not probed (a probe would be traffic the
    /// spec did not declare); `files` works on the workspaces, checked with the store. Reasons
    /// never carry host paths.
    pub async fn probe(&self) -> Vec<(&'static str, Result<(), String>)> {
        self.probe_in(crate::policy::NetworkMode::None).await
    }

    /// [`probe`](Self::probe) on an instance in `mode` (an upstream MCP server started by the
    /// probe gets that network, and then serves the instance's calls).
    pub async fn probe_in(
        &self,
        mode: crate::policy::NetworkMode,
    ) -> Vec<(&'static str, Result<(), String>)> {
        let mut out = Vec::new();
        let mut names: Vec<_> = self.by_name.keys().copied().collect();
        names.sort_unstable();
        for name in names {
            let instance = &self.by_name[name].instance;
            let result = match instance {
                Instance::Sqlite(db) => db.probe().await,
                Instance::Postgres(db) => db.probe().await,
                Instance::Logs(l) => l.probe(),
                Instance::Sandbox(s) => s.probe().await,
                Instance::Mcp(m) => m.probe(mode).await,
                Instance::Files | Instance::Http(_) => continue,
                #[cfg(feature = "fixture-kind")]
                Instance::Echo(_) => continue,
            };
            out.push((name, result));
        }
        out
    }
}

/// Runs `connector.operation` with arguments already validated against the operation's schema.
///
/// Large results come back as [`ToolOutput::Stream`](crate::server::ToolOutput::Stream), produced
/// on a blocking thread through a bounded channel: memory stays bounded however big the result.
/// Progress, warnings and cancellation travel through `signals`.
pub async fn call(
    connectors: &Connectors,
    connector: &str,
    operation: &str,
    ws: &impl WorkspaceSource,
    args: JsonObject,
    signals: &CallSignals,
) -> ToolResult {
    let jail = sandbox::JailContext::strictest();
    call_in(connectors, connector, operation, ws, args, &jail, signals).await
}

/// [`call`] from the call wrapper: a sandbox runs with this instance's network mode and stops
/// when the session escalates (`jail`).
pub async fn call_in(
    connectors: &Connectors,
    connector: &str,
    operation: &str,
    ws: &impl WorkspaceSource,
    args: JsonObject,
    jail: &sandbox::JailContext<'_>,
    signals: &CallSignals,
) -> ToolResult {
    let Built {
        def,
        operations,
        instance,
        ..
    } = connectors
        .by_name
        .get(connector)
        .ok_or_else(|| ToolError::bug(format!("connector `{connector}` is not built")))?;
    let op = operations
        .iter()
        .find(|o| o.def.name.eq(operation))
        .ok_or_else(|| {
            ToolError::bug(format!(
                "operation `{connector}.{operation}` is not compiled in"
            ))
        })?;
    let budget = connectors.budget;
    // Every kind but the built-in files runs boxed: each kind's future is large (an HTTP client,
    // an upstream session, a jail), and inline they would make every call's future as large as
    // the largest of them, copied whole by each layer that boxes it.
    match (&op.body, instance) {
        (OperationBody::Files { action }, Instance::Files) => {
            files::run(action.as_str(), ws.workspace()?, &args, budget, signals).await
        }
        (OperationBody::Sql { sql, writes }, Instance::Sqlite(db)) => {
            Box::pin(db.run(sql, *writes, op.def.params_schema, args, budget, signals)).await
        }
        (OperationBody::Sql { sql, writes }, Instance::Postgres(db)) => {
            Box::pin(db.run(sql, *writes, args, budget, signals)).await
        }
        (OperationBody::Http { .. }, Instance::Http(h)) => {
            Box::pin(h.run(&op.body, args, signals)).await
        }
        (OperationBody::Logs { action }, Instance::Logs(l)) => {
            Box::pin(l.run(action.as_str(), args, budget, signals)).await
        }
        (OperationBody::Sandbox { command }, Instance::Sandbox(s)) => {
            Box::pin(s.run(command, &args, ws.workspace()?, jail, signals)).await
        }
        (OperationBody::Mcp { tool, renames, .. }, Instance::Mcp(m)) => {
            let place = mcp::Place {
                mode: jail.mode,
                workspace: ws.workspace()?,
                signals,
            };
            Box::pin(m.run(tool, mcp::upstream_args(args, renames), place)).await
        }
        #[cfg(feature = "fixture-kind")]
        (OperationBody::Echo, Instance::Echo(e)) => e.run(&args),
        _ => Err(ToolError::bug(format!(
            "operation `{connector}.{operation}` does not match connector kind `{}`",
            def.kind
        ))),
    }
}

/// An error's causes (its `source()` chain, without the error's own message), innermost last,
/// each once. Connector errors name what failed from these, never from a message that could
/// carry a URL.
pub(crate) fn error_causes(e: &dyn std::error::Error) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts
}

/// A string argument that the schema made required.
pub(crate) fn arg_str<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(|v| v.as_str())
        .ok_or_else(|| ToolError::retry(format!("`{name}` must be a string")))
}

/// An optional string argument.
pub(crate) fn opt_str<'a>(args: &'a JsonObject, name: &str) -> Option<&'a str> {
    args.get(name).and_then(|v| v.as_str())
}

/// An optional non-negative integer argument (the schema bounds it).
pub(crate) fn opt_usize(args: &JsonObject, name: &str) -> Option<usize> {
    args.get(name)
        .and_then(|v| v.as_u64())
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// The `egress` of `def` with its variables expanded through `env` (empty for a connector that
/// runs no jail, or whose settings do not read): what its jails' gate allows, for the instance's
/// proxy to hold their labelled requests to.
pub fn jail_egress(
    def: &'static ConnectorDef,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    settings::typed(def, env)
        .map(|s| s.egress().to_vec())
        .unwrap_or_default()
}
