//! (b) A bare rmcp Streamable HTTP server with the same `echo` tool and a plain `jsonwebtoken`
//! check in an axum middleware; (d) a raw axum POST echo, no MCP, no auth (the ceiling).

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
}

impl Echo {
    fn new() -> Echo {
        let schema: Map<String, Value> = serde_json::from_str(
            r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#,
        )
        .expect("static schema");
        Echo {
            tool: Arc::new(Tool::new("echo", "Echo the text back.", Arc::new(schema))),
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
        Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == "echo").then(|| (*self.tool).clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "echo" {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("`text` is required", None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(text.to_string())]).into())
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
