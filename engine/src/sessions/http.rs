//! The token service's HTTP face: `POST /token` (RFC 8693 exchange, RFC 6749 refresh), the
//! authorization server metadata (RFC 8414) and the public key set.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::{OAuthError, TOKEN_EXCHANGE, TokenRequest, TokenService};

/// Largest token request body, in bytes (two tokens of `auth.max_token_bytes` and a little).
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// Where the service is reached.
#[derive(Clone, Debug)]
pub struct Urls {
    /// `{public_url}/token`.
    pub token_endpoint: String,
    /// `{public_url}/.well-known/jwks.json`.
    pub jwks_uri: String,
    /// `{public_url}/authorize`.
    pub authorization_endpoint: String,
    /// `{public_url}/register`.
    pub registration_endpoint: String,
    /// `{public_url}/oauth/callback`: where the provider sends the user back.
    pub callback: String,
}

impl Urls {
    /// The endpoints under `public_url`.
    pub fn under(public_url: &str) -> Urls {
        let base = public_url.trim_end_matches('/');
        Urls {
            token_endpoint: format!("{base}/token"),
            jwks_uri: format!("{base}/.well-known/jwks.json"),
            authorization_endpoint: format!("{base}/authorize"),
            registration_endpoint: format!("{base}/register"),
            callback: format!("{base}/oauth/callback"),
        }
    }
}

struct Served {
    service: Arc<TokenService>,
    callback: String,
    metadata: serde_json::Value,
    jwks: serde_json::Value,
}

/// The routes of the token service.
pub fn routes(service: Arc<TokenService>, urls: &Urls) -> Router {
    let mut metadata = serde_json::json!({
        "issuer": service.issuer(),
        "token_endpoint": urls.token_endpoint,
        "jwks_uri": urls.jwks_uri,
        "grant_types_supported": [TOKEN_EXCHANGE, "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "response_types_supported": [],
    });
    if service.offers_login() {
        metadata["authorization_endpoint"] = urls.authorization_endpoint.clone().into();
        metadata["registration_endpoint"] = urls.registration_endpoint.clone().into();
        metadata["response_types_supported"] = serde_json::json!(["code"]);
        metadata["grant_types_supported"] =
            serde_json::json!(["authorization_code", TOKEN_EXCHANGE, "refresh_token"]);
        metadata["code_challenge_methods_supported"] = serde_json::json!(["S256"]);
        metadata["authorization_response_iss_parameter_supported"] = true.into();
        metadata["client_id_metadata_document_supported"] = false.into();
    }
    let jwks = serde_json::json!({ "keys": [service.key().public_jwk()] });
    let served = Arc::new(Served {
        service,
        callback: urls.callback.clone(),
        metadata,
        jwks,
    });
    Router::new()
        .route(
            "/token",
            post(token).layer(DefaultBodyLimit::max(MAX_FORM_BYTES)),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(|State(s): State<Arc<Served>>| async move { axum::Json(s.metadata.clone()) }),
        )
        .route("/authorize", get(authorize))
        .route("/oauth/callback", get(callback))
        .route(
            "/register",
            post(register).layer(DefaultBodyLimit::max(MAX_FORM_BYTES)),
        )
        .route(
            "/.well-known/jwks.json",
            get(|State(s): State<Arc<Served>>| async move { axum::Json(s.jwks.clone()) }),
        )
        .with_state(served)
}

type Query = axum::extract::Query<std::collections::BTreeMap<String, String>>;

/// A 302 to `url` (setting the cookie, when there is one), or a 400 page saying why there is
/// nowhere to send the user.
fn step(answer: Result<(String, Option<String>), String>) -> Response {
    match answer {
        Ok((url, cookie)) => match HeaderValue::from_str(&url) {
            Ok(location) => {
                let mut resp = StatusCode::FOUND.into_response();
                resp.headers_mut().insert(header::LOCATION, location);
                resp.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
                    resp.headers_mut().insert(header::SET_COOKIE, cookie);
                }
                resp
            }
            Err(_) => (StatusCode::BAD_REQUEST, "bad redirect URI\n").into_response(),
        },
        Err(why) => (StatusCode::BAD_REQUEST, format!("sign-in refused: {why}\n")).into_response(),
    }
}

async fn authorize(State(s): State<Arc<Served>>, axum::extract::Query(q): Query) -> Response {
    step(s.service.authorize(&s.callback, &q).await)
}

async fn callback(
    State(s): State<Arc<Served>>,
    headers: axum::http::HeaderMap,
    axum::extract::Query(q): Query,
) -> Response {
    let cookies: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    step(
        s.service
            .callback(&s.callback, &q, &cookies.join("; "))
            .await
            .map(|url| (url, None)),
    )
}

async fn register(
    State(s): State<Arc<Served>>,
    body: Result<axum::Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let answer = match body {
        Err(e) => Err(OAuthError::new(
            "invalid_client_metadata",
            format!("the body must be JSON: {e}"),
        )),
        Ok(axum::Json(body)) => s.service.register(&body),
    };
    match answer {
        Ok(client) => (StatusCode::CREATED, axum::Json(client)).into_response(),
        Err(e) => {
            let body = serde_json::json!({"error": e.code, "error_description": e.description});
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
    }
}

async fn token(
    State(s): State<Arc<Served>>,
    form: Result<axum::Form<Vec<(String, String)>>, axum::extract::rejection::FormRejection>,
) -> Response {
    let answer = match form {
        Err(e) => Err(OAuthError::request(format!(
            "the body must be application/x-www-form-urlencoded: {e}"
        ))),
        Ok(axum::Form(pairs)) => match TokenRequest::from_pairs(pairs) {
            Ok(req) => s.service.answer(&req).await,
            Err(e) => Err(e),
        },
    };
    let mut resp = match answer {
        Ok(issued) => (StatusCode::OK, axum::Json(issued)).into_response(),
        Err(e) => {
            let status = if e.code == "server_error" {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::BAD_REQUEST
            };
            tracing::info!(error = e.code, description = %e.description, "token request refused");
            let body = serde_json::json!({"error": e.code, "error_description": e.description});
            (status, axum::Json(body)).into_response()
        }
    };
    // RFC 6749 §5.1: token responses are never cached.
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
