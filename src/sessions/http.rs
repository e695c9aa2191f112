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
}

impl Urls {
    /// The endpoints under `public_url`.
    pub fn under(public_url: &str) -> Urls {
        let base = public_url.trim_end_matches('/');
        Urls {
            token_endpoint: format!("{base}/token"),
            jwks_uri: format!("{base}/.well-known/jwks.json"),
        }
    }
}

struct Served {
    service: Arc<TokenService>,
    metadata: serde_json::Value,
    jwks: serde_json::Value,
}

/// The routes of the token service.
pub fn routes(service: Arc<TokenService>, urls: &Urls) -> Router {
    let metadata = serde_json::json!({
        "issuer": service.issuer(),
        "token_endpoint": urls.token_endpoint,
        "jwks_uri": urls.jwks_uri,
        "grant_types_supported": [TOKEN_EXCHANGE, "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "response_types_supported": [],
    });
    let jwks = serde_json::json!({ "keys": [service.key().public_jwk()] });
    let served = Arc::new(Served {
        service,
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
        .route(
            "/.well-known/jwks.json",
            get(|State(s): State<Arc<Served>>| async move { axum::Json(s.jwks.clone()) }),
        )
        .with_state(served)
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
