//! The HTTP auth layer: verify the bearer token, put the identity where tool code reads it, answer
//! 401 with `WWW-Authenticate` naming the protected-resource metadata (RFC 9728), and bind each
//! transport session (`Mcp-Session-Id`) to the identity that opened it.

use crate::auth::Verifier;
use crate::identity::Identity;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The header rmcp uses for transport sessions.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Shared state of the auth layer.
pub struct AuthState {
    verifier: Verifier,
    metadata_url: String,
    sessions: Mutex<HashMap<String, Identity>>,
}

impl AuthState {
    /// `metadata_url` is the absolute URL of `/.well-known/oauth-protected-resource`.
    pub fn new(verifier: Verifier, metadata_url: String) -> AuthState {
        AuthState {
            verifier,
            metadata_url,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn unauthorized(&self, error: Option<&str>) -> Response {
        let challenge = match error {
            Some(e) => format!(
                "Bearer resource_metadata=\"{}\", error=\"invalid_token\", error_description=\"{e}\"",
                self.metadata_url
            ),
            None => format!("Bearer resource_metadata=\"{}\"", self.metadata_url),
        };
        let mut resp = (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response();
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

/// Axum middleware: 401 unless the request carries a valid token for this resource.
pub async fn require_token(
    State(state): State<Arc<AuthState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    let Some(token) = token else {
        return state.unauthorized(None);
    };
    let identity = match state.verifier.verify(token.trim()) {
        Ok(v) => v.identity,
        Err(e) => {
            tracing::info!(error = %e, "token refused");
            return state.unauthorized(Some(
                "the token is invalid, expired, or not for this resource",
            ));
        }
    };
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(sid) = &session {
        let bound = state
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sid)
            .cloned();
        if let Some(owner) = bound
            && owner != identity
        {
            tracing::warn!(%owner, caller = %identity, "transport session used with another identity's token");
            return (
                StatusCode::FORBIDDEN,
                "this transport session belongs to another identity\n",
            )
                .into_response();
        }
    }
    let deleting = req.method() == axum::http::Method::DELETE;
    req.extensions_mut().insert(identity.clone());
    let resp = next.run(req).await;
    let mut sessions = state.sessions.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(new_sid) = resp
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        sessions.entry(new_sid.to_string()).or_insert(identity);
    }
    if deleting && let Some(sid) = session {
        sessions.remove(&sid);
    }
    resp
}
