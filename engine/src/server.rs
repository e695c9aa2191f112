//! A runnable server: its static definition, its connectors and its handlers.

use crate::errors::ToolError;
use crate::identity::Identity;
use crate::policy::Sensitivity;
use crate::serverdef::ServerDef;
use crate::signals::{CallSignals, Unit};
use crate::tooldef::{ConnectorDef, ToolDef};
use futures::stream::BoxStream;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Tool arguments as they arrive: a JSON object.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a tool returns on success.
pub enum ToolOutput {
    /// Text (detected as JSON, table, log or plain text for truncation).
    Text(String),
    /// A structured result; returned as `structuredContent` and as text.
    Json(serde_json::Value),
    /// A result that arrives piece by piece; written to the workspace as it arrives.
    Stream(BoxStream<'static, Result<Chunk, ToolError>>),
}

impl std::fmt::Debug for ToolOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolOutput::Text(t) => f.debug_tuple("Text").field(&t.len()).finish(),
            ToolOutput::Json(_) => f.write_str("Json(..)"),
            ToolOutput::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

/// One piece of a streamed result.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    /// One line of text (log line, text line), without newline.
    Line(String),
    /// One table row (the first row is the header).
    Row(Vec<String>),
    /// Raw bytes, split into lines by the receiver.
    Bytes(bytes::Bytes),
}

/// The result of a tool's own code.
pub type ToolResult = Result<ToolOutput, ToolError>;

/// What tool code can see of the call: who calls, at which level, which tool.
#[derive(Clone, Debug)]
pub struct ToolContext {
    identity: Identity,
    level: Sensitivity,
    tool: &'static ToolDef,
    signals: CallSignals,
}

impl ToolContext {
    /// A context for a call (built by the runtime wrapper).
    pub fn new(
        identity: Identity,
        level: Sensitivity,
        tool: &'static ToolDef,
        signals: CallSignals,
    ) -> ToolContext {
        ToolContext {
            identity,
            level,
            tool,
            signals,
        }
    }

    /// Reports progress (`done` of `total` steps); sent to a caller that asked for progress, at
    /// a bounded rate.
    pub fn progress(&self, done: u64, total: Option<u64>) {
        self.signals.set_total(Unit::Steps, total);
        self.signals.set_done(Unit::Steps, done);
    }

    /// Whether the caller went away: a long handler should check this and return early (its
    /// result would be discarded anyway).
    pub fn is_cancelled(&self) -> bool {
        self.signals.is_stopped()
    }

    /// A warning for the client's log. Never put argument values or host paths in it.
    pub fn warn(&self, text: impl Into<String>) {
        self.signals.warn(text);
    }

    /// The caller.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The caller's user id.
    pub fn user_id(&self) -> &str {
        self.identity.user()
    }

    /// The caller's session id.
    pub fn session_id(&self) -> &str {
        self.identity.session()
    }

    /// The session's level when the call started (after this tool's own escalation).
    pub fn level(&self) -> Sensitivity {
        self.level
    }

    /// The tool being called.
    pub fn tool(&self) -> &'static ToolDef {
        self.tool
    }
}

/// The handler tools of one server, routed by name (generated per server).
pub trait HandlerSet: Send + Sync + 'static {
    /// Runs handler tool `tool` with already validated arguments.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        cx: ToolContext,
        args: JsonObject,
    ) -> BoxFuture<'a, ToolResult>;
}

/// For servers without handler tools.
pub struct NoHandlers;

impl HandlerSet for NoHandlers {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        _cx: ToolContext,
        _args: JsonObject,
    ) -> BoxFuture<'a, ToolResult> {
        unknown_handler(tool)
    }
}

/// The error for a handler dispatch that names no handler tool (a generator bug, never input).
pub fn unknown_handler<'a>(tool: &str) -> BoxFuture<'a, ToolResult> {
    let msg = format!("no handler is generated for tool `{tool}`");
    Box::pin(async move { Err(ToolError::bug(msg)) })
}

/// A handler's typed result as a structured output (`structuredContent`, checked against the
/// tool's `outputSchema` before it is sent).
pub fn to_output<T: serde::Serialize>(value: &T) -> ToolResult {
    serde_json::to_value(value)
        .map(ToolOutput::Json)
        .map_err(|e| ToolError::bug(format!("result cannot be serialised: {e}")))
}

/// Parses validated arguments into a tool's typed argument struct.
pub fn parse_args<T: serde::de::DeserializeOwned>(args: JsonObject) -> Result<T, ToolError> {
    serde_json::from_value(serde_json::Value::Object(args))
        .map_err(|e| ToolError::retry(format!("invalid arguments: {e}")))
}

/// A server ready to serve: definition, connectors and handlers.
#[derive(Clone)]
pub struct Server {
    /// The generated definition.
    pub def: &'static ServerDef,
    /// Every connector of the project.
    pub connectors: &'static [ConnectorDef],
    /// The handler tools.
    pub handlers: Arc<dyn HandlerSet>,
}

impl Server {
    /// Pairs a definition with its handlers.
    pub fn new(
        def: &'static ServerDef,
        connectors: &'static [ConnectorDef],
        handlers: impl HandlerSet,
    ) -> Server {
        Server {
            def,
            connectors,
            handlers: Arc::new(handlers),
        }
    }

    /// A connector by name.
    pub fn connector(&self, name: &str) -> Option<&'static ConnectorDef> {
        self.connectors.iter().find(|c| c.name == name)
    }
}
