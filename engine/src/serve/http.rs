//! Streamable HTTP serving: `/mcp` (rmcp behind the auth layer, with session caps), the RFC 9728
//! metadata document, and `/healthz`; served by the bounded accept loop of [`super::listener`].

use super::auth::{AuthState, SessionLimits};
use super::handler::McpServer;
use super::listener::{ConnLimits, ConnStats};
use super::sessions::Sessions;
use crate::auth::Verifier;
use crate::call::Runtime;
use crate::config::HttpConfig;
use axum::Router;
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::time::Duration;
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
    router_with_tokens(rt, verifier, issuer, http, public_url, shutdown, None)
}

/// [`router`], also serving the deployment's token service when one is given: `POST /token`,
/// its metadata and key set. A 401 then says where a provider's token is exchanged.
pub fn router_with_tokens(
    rt: Arc<Runtime>,
    verifier: Verifier,
    issuer: &str,
    http: &HttpConfig,
    public_url: &str,
    shutdown: CancellationToken,
    tokens: Option<Arc<crate::sessions::TokenService>>,
) -> Router {
    let token_urls = crate::sessions::http::Urls::under(public_url);
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource",
        public_url.trim_end_matches('/')
    );
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = http.stateful;
    config.allowed_hosts = http.allowed_hosts.clone();
    // Origin is always checked: an empty list refuses every request that carries one.
    config = config
        .with_allowed_origins(http.allowed_origins.clone())
        .enforce_origin_validation();
    config.cancellation_token = shutdown.clone();
    config.max_request_body_bytes = http.max_body_bytes;
    // Stateless: one plain JSON body per request; rmcp falls back to SSE by itself when the
    // handler sends anything before its result (progress notifications).
    config.json_response = !http.stateful && http.json_response;
    let handler = McpServer::new(rt.clone());
    let (mut auth, evicted) = AuthState::new(
        verifier,
        metadata_url,
        SessionLimits {
            max_total: http.max_sessions.max(1),
            max_per_identity: http.max_sessions_per_identity.max(1),
            stateful: http.stateful,
        },
    );
    if tokens.is_some() {
        auth.set_exchange_hint(token_urls.token_endpoint.clone());
    }
    let auth = Arc::new(auth);
    // The identity provider's keys (when configured) are fetched now and kept fresh.
    let verifier = auth.verifier();
    let stop = shutdown.clone();
    tokio::spawn(async move { verifier.start_remote(stop).await });
    let (forget, levels) = (auth.clone(), handler.clone());
    let idle = Duration::from_secs(http.session_idle_timeout_s.max(1));
    let sessions = Sessions::new(
        http.max_sessions,
        idle,
        Arc::new(move |sid: &str| {
            forget.forget_session(sid);
            levels.forget_session(sid);
        }),
    );
    let sessions = Arc::new(sessions);
    tokio::spawn(super::sessions::close_evicted(evicted, sessions.clone()));
    if http.stateful {
        let park_after =
            (http.park_after_ms > 0).then(|| Duration::from_millis(http.park_after_ms));
        // rmcp keeps every session's `initialize` parameters there, and restores parked ones.
        config.session_store = Some(sessions.store());
        tokio::spawn(super::sessions::reap_idle(
            sessions.clone(),
            auth.clone(),
            handler.clone(),
            idle,
            park_after,
            shutdown.clone(),
        ));
    }
    let direct = Arc::new(super::direct::Direct::new(
        handler.clone(),
        http.stateful,
        http.max_body_bytes,
        shutdown.clone(),
    ));
    let open_sessions = sessions.clone();
    let metrics = rt.metrics().clone();
    let ready_rt = rt.clone();
    let health = rt.isolation().clone();
    let mcp = Shared(Arc::new(StreamableHttpService::new(
        move || Ok(handler.for_session()),
        sessions,
        config,
    )));
    let mut metadata = serde_json::json!({
        "resource": format!("{}/mcp", public_url.trim_end_matches('/')),
        "bearer_methods_supported": ["header"],
        "resource_name": format!("bulkhead {}", rt.server().def.name),
    });
    // RFC 9728 §2: authorization servers by their issuer identifier, a URL. A development
    // issuer that is not one (`bulkhead-dev`) names no server clients could discover.
    if reqwest::Url::parse(issuer).is_ok_and(|u| matches!(u.scheme(), "https" | "http")) {
        metadata["authorization_servers"] = serde_json::json!([issuer]);
    }
    let scopes = auth.verifier().scopes_supported().to_vec();
    if !scopes.is_empty() {
        metadata["scopes_supported"] = serde_json::json!(scopes);
    }
    let mode = rt.mode().as_str();
    let hosts = Arc::new(super::hosts::Allowed::new(
        &http.allowed_hosts,
        &http.allowed_origins,
    ));
    let token_routes = match tokens {
        Some(service) => {
            // The provider's keys (when remote) are fetched now and kept fresh, as ours are.
            let keep = service.clone();
            let stop = shutdown.clone();
            rt.use_token_service(service.clone());
            match crate::approval::UsedIds::open(rt.state()) {
                Ok(used) => service.use_store(used),
                Err(e) => tracing::warn!(
                    error = %e,
                    "authorization codes and refresh tokens cannot be redeemed"
                ),
            }
            tokio::spawn(async move { keep.provider().start_remote(stop).await });
            crate::sessions::http::routes(service, &token_urls)
        }
        None => Router::new(),
    };
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(Gate { auth, direct }),
            mcp_entry,
        ))
        .merge(token_routes)
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
            // Alive and isolated as its mode requires (the self-check's last result).
            get(move || {
                let health = health.clone();
                async move {
                    match health.broken_because() {
                        None if health.is_unchecked() => (
                            axum::http::StatusCode::OK,
                            format!("ok {mode} (unisolated)\n"),
                        ),
                        None => (axum::http::StatusCode::OK, format!("ok {mode}\n")),
                        Some(why) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("isolation check failed ({mode}): {why}\n"),
                        ),
                    }
                }
            }),
        )
        // Ready: the store, the audit log and the connectors answer; 503 names what does not.
        .route(
            "/readyz",
            get(move || {
                let rt = ready_rt.clone();
                async move {
                    let checks = rt.readiness().await;
                    let ok = checks.iter().all(|(_, r)| r.is_ok());
                    let mut body = String::from(if ok { "ready\n" } else { "not ready\n" });
                    for (what, r) in checks {
                        match r {
                            Ok(()) => body.push_str(&format!("ok    {what}\n")),
                            Err(e) => body.push_str(&format!("fail  {what}: {e}\n")),
                        }
                    }
                    let status = if ok {
                        axum::http::StatusCode::OK
                    } else {
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    };
                    (status, body)
                }
            }),
        )
        // Names and counts only (tools, outcomes, reasons): no identities, arguments or paths.
        .route(
            "/metrics",
            get(move || {
                let (metrics, sessions) = (metrics.clone(), open_sessions.clone());
                async move {
                    let open = sessions.open().await;
                    metrics.set_sessions(open);
                    metrics.set_parked(open.saturating_sub(sessions.live().await));
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            crate::metrics::CONTENT_TYPE,
                        )],
                        metrics.render(),
                    )
                }
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            hosts,
            super::hosts::check_host,
        ))
}

/// rmcp's service behind an `Arc`. axum clones a route's service for every request, and rmcp's
/// clone copies its configuration (host and origin lists); this clone is a reference count, and
/// requests that reach rmcp are handled by the shared service without copying it.
#[derive(Clone)]
struct Shared(Arc<StreamableHttpService<McpServer, Sessions>>);

impl tower::Service<axum::extract::Request> for Shared {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::extract::Request) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(service.handle(req).await.map(axum::body::Body::new)) })
    }
}

/// What stands in front of rmcp on `/mcp`.
struct Gate {
    auth: Arc<AuthState>,
    direct: Arc<super::direct::Direct>,
}

/// The `/mcp` stack, in this order: the token (401/403/429/503, `auth::authorize`), then tool
/// calls answered and cancellations routed here (`direct::answer_or`), then rmcp. One middleware
/// rather than one per step, so a request pays for one boxed future and one clone of the route.
async fn mcp_entry(
    axum::extract::State(gate): axum::extract::State<Arc<Gate>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    super::auth::authorize(&gate.auth, req, |req| {
        super::direct::answer_or(&gate.direct, req, |req| {
            session_end_is_no_content(req, next)
        })
    })
    .await
}

/// A session ended by `DELETE` is answered `204 No Content`, not rmcp's `202 Accepted`: the
/// session is gone when the answer leaves, and the official Python SDK accepts only 200 or 204
/// (it logs "Session termination failed: 202" otherwise).
async fn session_end_is_no_content(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = req.method() == axum::http::Method::DELETE;
    let mut resp = next.run(req).await;
    if delete && resp.status() == axum::http::StatusCode::ACCEPTED {
        *resp.status_mut() = axum::http::StatusCode::NO_CONTENT;
        *resp.body_mut() = axum::body::Body::empty();
    }
    resp
}

/// Serves `app` on `listener` until `shutdown` is cancelled, with the default connection limits.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_with(
        listener,
        app,
        shutdown,
        ConnLimits::default(),
        Arc::default(),
    )
    .await
}

/// Serves `app` on `listener` within `limits` until `shutdown` is cancelled.
pub async fn serve_with(
    listener: impl Into<crate::endpoint::Bound>,
    app: Router,
    shutdown: CancellationToken,
    limits: ConnLimits,
    stats: Arc<ConnStats>,
) -> std::io::Result<()> {
    super::listener::serve(listener.into(), app, shutdown, limits, stats).await
}
