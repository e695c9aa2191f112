//! (b) A bare rmcp Streamable HTTP server with the same `echo` tool, a `read_file(path)` tool
//! (reads a small file, as FastMCP's reference does) and a plain `jsonwebtoken` check in an axum
//! middleware; (d) a raw axum POST echo, no MCP, no auth (the ceiling).

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
struct Echo {
    tool: Arc<Tool>,
    read: Arc<Tool>,
}

impl Echo {
    fn new() -> Echo {
        let schema = |prop: &str| -> Arc<Map<String, Value>> {
            Arc::new(
                serde_json::from_str(&format!(
                    r#"{{"type":"object","properties":{{"{prop}":{{"type":"string"}}}},"required":["{prop}"],"additionalProperties":false}}"#
                ))
                .expect("static schema"),
            )
        };
        Echo {
            tool: Arc::new(Tool::new("echo", "Echo the text back.", schema("text"))),
            read: Arc::new(Tool::new(
                "read_file",
                "Read a small text file.",
                schema("path"),
            )),
        }
    }
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bare-rmcp-echo", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            (*self.tool).clone(),
            (*self.read).clone(),
        ]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        match name {
            "echo" => Some((*self.tool).clone()),
            "read_file" => Some((*self.read).clone()),
            _ => None,
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arg = |name: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| ErrorData::invalid_params(format!("`{name}` is required"), None))
        };
        let text = match &*request.name {
            "echo" => arg("text")?,
            "read_file" => tokio::fs::read_to_string(arg("path")?)
                .await
                .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?,
            _ => return Err(ErrorData::invalid_params("unknown tool", None)),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

#[derive(Deserialize)]
struct Claims {
    #[allow(dead_code)]
    sub: String,
}

async fn jwt(
    State(v): State<Arc<(DecodingKey, Validation)>>,
    mut req: Request,
    next: Next,
) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    match token.map(|t| decode::<Claims>(t, &v.0, &v.1)) {
        Some(Ok(data)) => {
            req.extensions_mut().insert(data.claims.sub);
            next.run(req).await
        }
        _ => (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response(),
    }
}

/// The bare rmcp router: `/mcp` behind the JWT check, same transport config as Bulkhead's.
pub fn rmcp_router(secret: &str, stateful: bool, cancel: CancellationToken) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = stateful;
    // Stateless: one JSON body per reply, as Bulkhead answers (`http.json_response`).
    config.json_response = !stateful;
    config.allowed_hosts = vec!["localhost".into(), "127.0.0.1".into()];
    config.cancellation_token = cancel;
    let echo = Echo::new();
    let mcp = StreamableHttpService::new(
        move || Ok(echo.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&[crate::ISSUER]);
    validation.set_audience(&[crate::AUDIENCE]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let state = Arc::new((DecodingKey::from_secret(secret.as_bytes()), validation));
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(state, jwt))
}

/// The ceiling: POST `/mcp` answers with the request body, nothing else.
pub fn axum_echo() -> Router {
    Router::new().route(
        "/mcp",
        post(|body: axum::body::Bytes| async move {
            ([(header::CONTENT_TYPE, "application/json")], body)
        }),
    )
}
