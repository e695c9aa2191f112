//! The MCP face of a runtime: an rmcp `ServerHandler` that lists the generated tools and sends
//! every call through [`Runtime::call`]. Identity comes from the HTTP request (set by the auth
//! layer) or, on stdio, from configuration — never from tool arguments or transport sessions.
//!
//! A call's progress and warnings reach the client through [`super::notify`]; a cancelled call
//! (`notifications/cancelled`, or the end of the request's connection where rmcp ends the
//! request with it) drops the call future, which stops its work (see [`crate::signals`]).
#![allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)

use super::inflight::{Inflight, request_key};
use super::notify::{self, Forwarder, Wanted};
use crate::auth::Grants;
use crate::call::{CallOutcome, Runtime};
use crate::identity::Identity;
use crate::policy::{Sensitivity, meta};
use crate::signals::CallSignals;
use crate::tooldef::ToolDef;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel, MetaObject,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The rmcp handler; cheap to clone. Each transport session (or stateless request) gets its own
/// through [`for_session`](McpServer::for_session), so `logging/setLevel` is per session.
#[derive(Clone)]
pub struct McpServer {
    rt: Arc<Runtime>,
    tools: Arc<Vec<Tool>>,
    stdio_identity: Option<Identity>,
    /// The session's `logging/setLevel` where there is no transport session id (stdio);
    /// [`notify::DEFAULT_LEVEL`] until the client sets one.
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
    /// `logging/setLevel` of each HTTP transport session, by session id, shared by every
    /// session's handler and by [`super::direct`] (which answers calls without a handler).
    /// Entries go when their session ends ([`McpServer::forget_session`]).
    levels: Arc<Mutex<HashMap<String, LoggingLevel>>>,
    /// Calls running on this server, shared by every session's handler.
    inflight: Arc<Inflight>,
}

/// The transport session id of the HTTP request behind `ctx`, if any.
fn session_of(ctx: &RequestContext<RoleServer>) -> Option<&str> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.headers.get(super::auth::SESSION_HEADER))
        .and_then(|v| v.to_str().ok())
}

impl McpServer {
    /// A handler for HTTP (identity from each request).
    pub fn new(rt: Arc<Runtime>) -> McpServer {
        let tools = Arc::new(rt.server().def.tools.iter().map(mcp_tool).collect());
        McpServer {
            rt,
            tools,
            stdio_identity: None,
            log_level: Arc::default(),
            levels: Arc::default(),
            inflight: Arc::default(),
        }
    }

    /// The log level transport session `sid` set, if it set one.
    pub fn session_level(&self, sid: &str) -> Option<LoggingLevel> {
        self.levels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sid)
            .copied()
    }

    /// Forgets what transport session `sid` set (it ended). Idempotent.
    pub fn forget_session(&self, sid: &str) {
        self.levels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(sid);
    }

    /// Keeps only the levels of sessions for which `live` holds (a backstop for a level set
    /// while its session was ending).
    pub fn retain_sessions(&self, live: impl Fn(&str) -> bool) {
        self.levels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|sid, _| live(sid));
    }

    /// The calls running on this server (for the stateless cancellation layer).
    pub fn inflight(&self) -> Arc<Inflight> {
        self.inflight.clone()
    }

    /// A handler for a new transport session: shares the runtime, starts with no log level.
    pub fn for_session(&self) -> McpServer {
        McpServer {
            log_level: Arc::default(),
            ..self.clone()
        }
    }

    /// What a call's caller wants forwarded: progress if it sent a token, warnings if its
    /// level (this request's `_meta`, else the session's, else the default) lets them through.
    fn wanted(&self, ctx: &RequestContext<RoleServer>) -> Wanted {
        let level = ctx
            .meta
            .log_level()
            .or_else(|| session_of(ctx).and_then(|sid| self.session_level(sid)))
            .or_else(|| *self.log_level.lock().unwrap_or_else(|e| e.into_inner()))
            .unwrap_or(notify::DEFAULT_LEVEL);
        Wanted {
            progress: ctx.meta.get_progress_token(),
            warnings: notify::wants_warnings(level),
        }
    }

    /// Whether a call of `tool` needs the request itself: it may ask a person for approval (the
    /// session's peer) or binds parameters to the token's claims.
    pub fn may_ask(&self, tool: &str) -> bool {
        self.rt
            .server()
            .def
            .tool(tool)
            .is_some_and(|t| t.approval.is_some() || !t.bound.is_empty())
    }

    /// How the caller of this request can be asked for approval, and its token's claims: on a
    /// 2026-07-28 request, input-required rounds (with the answer it carries, if any); on a
    /// session whose client declared form elicitation, `elicitation/create`; otherwise not at all.
    fn ask_context(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
    ) -> crate::call::AskContext {
        let parts = ctx.extensions.get::<http::request::Parts>();
        let claims =
            parts.and_then(|p| p.extensions.get::<crate::approval::TokenClaims>().cloned());
        let sessionless = parts.is_some_and(|p| {
            super::protocol::is_sessionless(p.headers.get("mcp-protocol-version"))
        });
        let asker = if sessionless {
            crate::approval::Asker::Rounds {
                state: request.request_state.clone(),
                responses: request
                    .input_responses
                    .as_ref()
                    .map(|r| r.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            }
        } else if ctx
            .peer
            .peer_info()
            .is_some_and(|info| crate::approval::takes_forms(&info.capabilities))
        {
            crate::approval::Asker::Elicit(ctx.peer.clone())
        } else {
            crate::approval::Asker::None
        };
        crate::call::AskContext { asker, claims }
    }

    /// A handler for stdio, where every call runs as `identity`.
    pub fn stdio(rt: Arc<Runtime>, identity: Identity) -> McpServer {
        McpServer {
            stdio_identity: Some(identity),
            ..McpServer::new(rt)
        }
    }

    /// What the caller's token grants (stdio: everything; HTTP without the auth layer's grant:
    /// nothing, which fails closed).
    fn grants(&self, ctx: &RequestContext<RoleServer>) -> Grants {
        if self.stdio_identity.is_some() {
            return Grants::All;
        }
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Grants>())
            .cloned()
            .unwrap_or(Grants::Scopes(Vec::new()))
    }

    fn identity(&self, ctx: &RequestContext<RoleServer>) -> Option<Identity> {
        if let Some(id) = &self.stdio_identity {
            return Some(id.clone());
        }
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Identity>())
            .cloned()
    }
}

impl McpServer {
    /// One tool call as every HTTP path runs it (rmcp's handler and [`super::direct`]): an
    /// unknown name is refused as invalid params and audited; a known one is registered for
    /// `notifications/cancelled` under `request_key` and runs through [`Runtime::call_with`].
    /// Cancellation (by the client, by `ct`) drops the call, which stops its work and records the
    /// outcome `cancelled`.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_call(
        &self,
        id: &Identity,
        grants: &Grants,
        request_key: String,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        signals: &CallSignals,
        ct: &CancellationToken,
        ask: &crate::call::AskContext,
    ) -> Result<CallOutcome, ErrorData> {
        if self.rt.server().def.tool(name).is_none() {
            // Refused as the protocol says (invalid params), and audited like any refusal.
            self.rt.refuse_unknown(id, name, arguments.as_ref()).await;
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            ));
        }
        let registered = self.inflight.register(id, request_key);
        // Boxed: the wrapper's future is large, and every layer around this one (axum boxes each
        // middleware's future) would otherwise copy it whole.
        let call = Box::pin(
            self.rt
                .call_asking(id, grants, name, arguments, signals, ask),
        );
        tokio::select! {
            out = call => Ok(out),
            _ = async { tokio::select! {
                _ = ct.cancelled() => {},
                _ = registered.token().cancelled() => {},
            } } => {
                tracing::info!(tool = %name, "call cancelled by the client");
                Err(ErrorData::new(ErrorCode::INVALID_REQUEST, "request cancelled", None))
            }
        }
    }
}

/// The MCP tool description of a generated tool (schema and annotations straight from the spec).
pub fn mcp_tool(def: &ToolDef) -> Tool {
    let schema: Map<String, Value> = serde_json::from_str(def.input_schema).unwrap_or_default();
    let a = def.annotations;
    let mut annotations = ToolAnnotations::new()
        .read_only(a.read_only)
        .destructive(a.destructive)
        .idempotent(a.idempotent)
        .open_world(a.open_world);
    annotations.title = def.title.map(str::to_string);
    let mut meta = Map::new();
    meta.insert(
        meta::PERMISSION.into(),
        Value::from(def.permission.as_str()),
    );
    meta.insert(
        meta::SENSITIVITY.into(),
        Value::from(def.sensitivity.as_str()),
    );
    meta.insert(meta::CONTEXT.into(), Value::from(def.context));
    let mut tool = Tool::new(def.name, def.description, Arc::new(schema))
        .with_annotations(annotations)
        .with_meta(MetaObject(meta));
    if let Some(out) = def.output_schema {
        let schema: Map<String, Value> = serde_json::from_str(out).unwrap_or_default();
        tool.output_schema = Some(Arc::new(schema));
    }
    if let Some(title) = def.title {
        tool = tool.with_title(title);
    }
    tool
}

/// The `input_required` answer of a call waiting for a person: the question under
/// [`crate::approval::INPUT_KEY`] and the sealed state.
fn input_required(
    pending: crate::approval::Pending,
) -> Result<rmcp::model::InputRequiredResult, ErrorData> {
    let request: rmcp::model::InputRequest = serde_json::from_value(serde_json::json!({
        "method": "elicitation/create",
        "params": pending.question,
    }))
    .map_err(|e| ErrorData::internal_error(format!("approval question: {e}"), None))?;
    let mut requests = rmcp::model::InputRequests::new();
    requests.insert(crate::approval::INPUT_KEY.to_owned(), request);
    Ok(rmcp::model::InputRequiredResult::new(
        Some(requests),
        Some(pending.state),
    ))
}

/// What a result's `_meta` says about its sensitivity: the session's level (Bulkhead's key and
/// the trust-annotations extension's shape, so any host can show and propagate it) and the
/// rules whose credentials were redacted.
pub(crate) fn result_meta(meta: &mut Map<String, Value>, level: Sensitivity, found: &[&str]) {
    meta.insert(meta::SENSITIVITY.into(), Value::from(level.as_str()));
    meta.insert(
        meta::TRUST_ANNOTATIONS.into(),
        serde_json::json!({
            "sensitiveHint": level.sensitive_hint(),
            "privateHint": level.is_private(),
        }),
    );
    if !found.is_empty() {
        meta.insert(meta::REDACTED.into(), Value::from(found.to_vec()));
    }
}

/// The MCP result of a call outcome, with the session's level in `_meta`.
pub fn mcp_result(out: CallOutcome) -> CallToolResult {
    let mut result = if out.is_error {
        CallToolResult::error(vec![ContentBlock::text(out.text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(out.text)])
    };
    result.structured_content = out.structured;
    let mut meta = Map::new();
    result_meta(&mut meta, out.level, &out.found);
    meta.insert(
        meta::REQUIRED_MODE.into(),
        Value::from(out.required_mode.as_str()),
    );
    if let Some(path) = out.saved_to {
        meta.insert(meta::SAVED_TO.into(), Value::from(path));
    }
    result.meta = Some(MetaObject(meta));
    result
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let def = self.rt.server().def;
        // Resources and prompts are announced only by servers that have them.
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .enable_logging()
            .build();
        if def.resources.is_empty() {
            caps.resources = None;
        }
        if def.prompts.is_empty() {
            caps.prompts = None;
        }
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(
                format!("bulkhead-{}", def.name),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(def.instructions)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (fixed, _) = super::catalog::listings(self.rt.server().def);
        Ok(ListResourcesResult::with_all_items(fixed))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let (_, templates) = super::catalog::listings(self.rt.server().def);
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(id) = self.identity(&ctx) else {
            return Err(ErrorData::internal_error("no caller identity", None));
        };
        let grants = self.grants(&ctx);
        let read = self.rt.read_resource_as(&id, &grants, &request.uri);
        let read = tokio::select! {
            r = read => r,
            _ = ctx.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode::INVALID_REQUEST, "request cancelled", None));
            }
        };
        match read {
            Some((resource, out)) => {
                super::catalog::read_result(resource, &request.uri, out).map(Into::into)
            }
            None => Err(ErrorData::resource_not_found(
                format!("no resource matches `{}`", request.uri),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(super::catalog::prompts(
            self.rt.server().def,
        )))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let def = self.rt.server().def;
        let Some(p) = def.prompts.iter().find(|p| p.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no prompt named `{}`", request.name),
                None,
            ));
        };
        let Some(id) = self.identity(&ctx) else {
            return Err(ErrorData::internal_error("no caller identity", None));
        };
        if let Err(e) = self.rt.count_prompt(&id, p.name).await {
            return Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                e.wire_text(),
                None,
            ));
        }
        let mut found = Vec::new();
        let mut result =
            super::catalog::get_prompt(p, request.arguments.as_ref(), self.rt.rules(), &mut found)?;
        if !found.is_empty() {
            let level = self
                .rt
                .raise_for_prompt(&id, p.name, &found)
                .await
                .map_err(|e| ErrorData::new(ErrorCode::INVALID_REQUEST, e.wire_text(), None))?;
            let mut meta = Map::new();
            result_meta(
                &mut meta,
                level,
                &found.iter().map(|f| f.rule).collect::<Vec<_>>(),
            );
            result.meta = Some(MetaObject(meta));
        }
        Ok(result.into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(id) = self.identity(&ctx) else {
            // The auth layer refuses unauthenticated HTTP requests; reaching this is a wiring bug.
            return Err(ErrorData::internal_error("no caller identity", None));
        };
        let signals = CallSignals::new();
        let forwarder = Forwarder::start(
            ctx.peer.clone(),
            self.wanted(&ctx),
            &request.name,
            signals.clone(),
        );
        let grants = self.grants(&ctx);
        let ask = self.ask_context(&ctx, &request);
        let mut out = self
            .run_call(
                &id,
                &grants,
                request_key(&ctx.id),
                &request.name,
                request.arguments,
                &signals,
                &ctx.ct,
                &ask,
            )
            .await?;
        forwarder.finish().await;
        if let Some(pending) = out.input_required.take() {
            return input_required(pending).map(Into::into);
        }
        Ok(mcp_result(out).into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        match session_of(&ctx) {
            Some(sid) => {
                self.levels
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(sid.to_owned(), request.level);
            }
            None => *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level),
        }
        Ok(())
    }
}
