//! Streamable HTTP serving: `/mcp` (rmcp behind the auth layer), the RFC 9728 metadata document,
//! and `/healthz`; TCP_NODELAY on every connection; graceful shutdown.

use super::auth::{AuthState, require_token};
use super::handler::McpServer;
use crate::auth::Verifier;
use crate::call::Runtime;
use crate::config::HttpConfig;
use axum::Router;
use axum::routing::get;
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The router serving one runtime. `public_url` is how clients reach this instance.
pub fn router(
    rt: Arc<Runtime>,
    verifier: Verifier,
    issuer: &str,
    http: &HttpConfig,
    public_url: &str,
    shutdown: CancellationToken,
) -> Router {
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource",
        public_url.trim_end_matches('/')
    );
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = http.stateful;
    config.allowed_hosts = http.allowed_hosts.clone();
    config.allowed_origins = http.allowed_origins.clone();
    config.cancellation_token = shutdown;
    let handler = McpServer::new(rt.clone());
    let mcp = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let auth = Arc::new(AuthState::new(verifier, metadata_url));
    let metadata = serde_json::json!({
        "resource": format!("{}/mcp", public_url.trim_end_matches('/')),
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": format!("bulkhead {}", rt.server().def.name),
    });
    let mode = rt.mode().as_str();
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(auth, require_token))
        .route(
            "/.well-known/oauth-protected-resource",
            get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(|| async { axum::http::StatusCode::NOT_FOUND }),
        )
        .route(
            "/healthz",
            get(move || async move { format!("ok {mode}\n") }),
        )
}

/// Serves `app` on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
