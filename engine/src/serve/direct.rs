//! `tools/call` answered straight from the HTTP request, without rmcp's per-request service
//! (stateless) or its session worker and channels (stateful): the path most traffic takes, with
//! the same wrapper, the same answer and one JSON body. The only request it takes is one that
//! rmcp would hand to [`McpServer::call_tool`] unchanged and answer without anything before the
//! result; everything else goes on to rmcp with its body as it came.
//!
//! Taken: a `POST` inside the auth layer (identity and grants set), with `Content-Length` at most
//! [`MAX_INSPECTED`] and the server's body limit, `Content-Type: application/json`, an `Accept`
//! that names both JSON and SSE, no `MCP-Protocol-Version` or one of a version with the
//! `initialize` handshake, no other `Mcp-*` header (SEP-2243 headers are rmcp's to check), on a
//! stateful server a transport session (the auth layer has checked it is open and the caller's),
//! and a body that is exactly one JSON-RPC request `tools/call` with `name` and optional
//! `arguments`, nothing else (a `_meta` — progress token, per-request level or version — goes on
//! to rmcp, which can stream).
//!
//! A call of a tool that may ask a person for approval goes on to rmcp too: asking needs the
//! session's peer (`elicitation/create`).
//!
//! Every small `POST` is also read for `notifications/cancelled` (alone or in a batch), which
//! cancels the caller's matching call here and in rmcp's handler alike (see
//! [`super::inflight`]); the message then goes on to rmcp unchanged.
#![allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)

use super::handler::{McpServer, mcp_result};
use super::inflight::{Inflight, request_key};
use super::notify;
use crate::auth::Grants;
use crate::identity::Identity;
use crate::signals::CallSignals;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ErrorData, JsonObject, JsonRpcError, JsonRpcNotification, JsonRpcResponse, JsonRpcVersion2_0,
    LoggingLevel, LoggingMessageNotification, RequestId, ServerJsonRpcMessage, ServerNotification,
    ServerResult,
};
use serde::Deserialize;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The largest `POST` body read here (a tool call with its arguments, or a cancellation);
/// larger bodies go on to rmcp unread, which enforces `http.max_body_bytes`.
pub const MAX_INSPECTED: u64 = 64 << 10;

const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const SESSION: HeaderName = HeaderName::from_static(super::auth::SESSION_HEADER);

/// What the layer needs: a handler (shared runtime, in-flight calls, session levels).
pub struct Direct {
    handler: McpServer,
    stateful: bool,
    max_body: u64,
    shutdown: CancellationToken,
}

impl Direct {
    /// The layer's state for `handler`'s server.
    pub fn new(
        handler: McpServer,
        stateful: bool,
        max_body: usize,
        shutdown: CancellationToken,
    ) -> Direct {
        Direct {
            handler,
            stateful,
            max_body: (max_body as u64).min(MAX_INSPECTED),
            shutdown,
        }
    }

    fn inflight(&self) -> Arc<Inflight> {
        self.handler.inflight()
    }
}

/// A `tools/call` request with nothing but a name and arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Call {
    /// Checked by deserialisation ("2.0" only).
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    /// Checked by deserialisation (`tools/call` only).
    #[serde(rename = "method")]
    _method: CallMethod,
    params: CallParams,
}

#[derive(Deserialize)]
enum CallMethod {
    #[serde(rename = "tools/call")]
    ToolsCall,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

/// Whether `headers` are those of a request this path may answer (see the module doc).
fn eligible_headers(headers: &HeaderMap, stateful: bool) -> bool {
    let content_type_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| essence(v).eq_ignore_ascii_case("application/json"));
    let (mut json, mut sse) = (false, false);
    for v in headers.get_all(header::ACCEPT) {
        for part in v.to_str().unwrap_or("").split(',') {
            let e = essence(part);
            json |= e.eq_ignore_ascii_case("application/json");
            sse |= e.eq_ignore_ascii_case("text/event-stream");
        }
    }
    let version_with_handshake = super::protocol::has_handshake(headers.get(PROTOCOL_VERSION));
    let has_session = headers.contains_key(SESSION);
    let other_mcp_header = headers.keys().any(|k| {
        let k = k.as_str();
        k.starts_with("mcp-") && k != "mcp-protocol-version" && k != super::auth::SESSION_HEADER
    });
    content_type_json
        && json
        && sse
        && version_with_handshake
        && !other_mcp_header
        && (has_session || !stateful)
}

fn essence(media: &str) -> &str {
    media.split(';').next().unwrap_or("").trim()
}

/// Answers a tool call or routes a cancellation here; `inner` (rmcp) answers everything else.
pub async fn answer_or<F, Fut>(direct: &Direct, req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let identity = req.extensions().get::<Identity>().cloned();
    let grants = req.extensions().get::<Grants>().cloned();
    let (Some(identity), Some(grants), Some(length), true) =
        (identity, grants, length, req.method() == Method::POST)
    else {
        return inner(req).await;
    };
    if length > direct.max_body {
        return inner(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, direct.max_body as usize).await else {
        // A body shorter or longer than announced: rmcp answers it.
        return inner(Request::from_parts(parts, Body::empty())).await;
    };
    cancel_named(&direct.inflight(), &identity, &bytes);
    if eligible_headers(&parts.headers, direct.stateful)
        && let Ok(call) = serde_json::from_slice::<Call>(&bytes)
        && !direct.handler.may_ask(&call.params.name)
    {
        let session = parts.headers.get(SESSION).and_then(|v| v.to_str().ok());
        let level = session
            .and_then(|sid| direct.handler.session_level(sid))
            .unwrap_or(notify::DEFAULT_LEVEL);
        return answer(direct, &identity, &grants, call, level).await;
    }
    inner(Request::from_parts(parts, Body::from(bytes))).await
}

/// Runs `call` and answers it: one JSON body, or an SSE stream of its warnings (as rmcp sends
/// them, before the result) and the result when the caller's `level` lets warnings through and
/// the call had any.
async fn answer(
    direct: &Direct,
    identity: &Identity,
    grants: &Grants,
    call: Call,
    level: LoggingLevel,
) -> Response {
    let signals = CallSignals::new();
    let outcome = direct
        .handler
        .run_call(
            identity,
            grants,
            request_key(&call.id),
            &call.params.name,
            call.params.arguments,
            &signals,
            &direct.shutdown,
            &crate::call::AskContext::default(),
        )
        .await;
    let message = match outcome {
        Ok(out) => {
            let mut result = ServerResult::CallToolResult(mcp_result(out));
            result.strip_result_type_for_legacy_peer();
            ServerJsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: JsonRpcVersion2_0,
                id: call.id,
                result,
            })
        }
        Err(e) => error_message(call.id, e),
    };
    let warnings = if notify::wants_warnings(level) {
        signals.take_warnings()
    } else {
        Vec::new()
    };
    if warnings.is_empty() {
        return json_body(&message);
    }
    let mut events = String::new();
    for text in warnings {
        let note = ServerJsonRpcMessage::Notification(JsonRpcNotification {
            jsonrpc: JsonRpcVersion2_0,
            notification: ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(notify::warning(&call.params.name, text)),
            ),
        });
        push_event(&mut events, &note);
    }
    push_event(&mut events, &message);
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        events,
    )
        .into_response()
}

fn error_message(id: RequestId, e: ErrorData) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::Error(JsonRpcError::new(Some(id), e))
}

fn json_body(message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialise the answer: {e}\n"),
        )
            .into_response(),
    }
}

/// Appends `message` as one SSE event (`data:` lines; JSON text has no newline).
fn push_event(out: &mut String, message: &ServerJsonRpcMessage) {
    if let Ok(text) = serde_json::to_string(message) {
        out.push_str("data: ");
        out.push_str(&text);
        out.push_str("\n\n");
    }
}

/// Cancels the calls of `identity` that a `notifications/cancelled` in `body` names.
fn cancel_named(inflight: &Inflight, identity: &Identity, body: &[u8]) {
    const METHOD: &[u8] = b"notifications/cancelled";
    if !body.windows(METHOD.len()).any(|w| w == METHOD) {
        return;
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let messages = match value {
        serde_json::Value::Array(items) => items,
        one => vec![one],
    };
    for m in messages {
        if m["method"] == "notifications/cancelled"
            && let Some(id) = m["params"].get("requestId")
            && inflight.cancel(identity, &request_key(id))
        {
            tracing::info!(request = %id, "call cancelled by the client");
        }
    }
}
