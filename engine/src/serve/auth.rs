//! The HTTP auth layer: verify the bearer token, put the identity where tool code reads it, answer
//! 401 with `WWW-Authenticate` naming the protected-resource metadata (RFC 9728), and bind each
//! transport session (`Mcp-Session-Id`) to the identity that opened it.
//!
//! Session limits: at `http.max_sessions_per_identity`, a new session of that identity evicts
//! its least recently used *idle* session (no request or stream in flight), logged, so a client
//! that never sends `DELETE` cannot lock its user out while memory stays bounded; only when every
//! one of them is busy is the new one refused (429). `http.max_sessions` (all identities) is a
//! plain refusal (503): evicting another user's session is not ours to do.

use crate::auth::Verifier;
use crate::identity::Identity;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The header rmcp uses for transport sessions.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Caps on transport sessions (`http:` in config.yaml).
#[derive(Clone, Copy, Debug)]
pub struct SessionLimits {
    /// Sessions open at once, all identities together.
    pub max_total: usize,
    /// Sessions open at once for one identity (user and session claim).
    pub max_per_identity: usize,
    /// Whether the transport keeps sessions at all (stateless serving keeps none).
    pub stateful: bool,
}

/// Which identity owns which transport session, and how many each identity holds.
#[derive(Default)]
struct SessionBook {
    owner: HashMap<String, Identity>,
    per_identity: HashMap<Identity, usize>,
    pending: HashMap<Identity, usize>,
    pending_total: usize,
    /// Per session: when a request last used it, and how many responses of it are in flight.
    use_of: HashMap<String, (Instant, usize)>,
}

/// Evictions queued at once before the idle reaper is left to close them.
const EVICTED_QUEUE: usize = 1024;

/// The ids of transport sessions the auth layer evicted, to be closed in the transport.
pub struct Evicted(pub tokio::sync::mpsc::Receiver<String>);

/// Shared state of the auth layer.
pub struct AuthState {
    verifier: Arc<Verifier>,
    metadata_url: String,
    /// The token endpoint where an identity provider's token is exchanged for a session token,
    /// when this deployment has one: a refused token's 401 says so.
    exchange_hint: Option<String>,
    limits: SessionLimits,
    book: Mutex<SessionBook>,
    /// Where evicted sessions go to be closed in the transport (by [`close_evicted`]'s task;
    /// bounded: one that does not fit is closed by the idle reaper, which ends sessions the
    /// book no longer holds).
    evicted: tokio::sync::mpsc::Sender<String>,
}

/// Marks a session busy while a response of it is in flight (dropped with the response body,
/// so a stream keeps its session busy for as long as it is open).
struct InUse {
    state: Arc<AuthState>,
    sid: String,
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut book = self.state.book();
        if let Some(u) = book.use_of.get_mut(&self.sid) {
            u.0 = Instant::now();
            u.1 = u.1.saturating_sub(1);
        }
    }
}

/// A response body that holds an [`InUse`] until it is dropped.
struct Tracked {
    inner: axum::body::Body,
    _in_use: InUse,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A refusal that names the limit that was hit.
fn limit_refusal(status: StatusCode, message: String) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": message},
    });
    let mut resp = (status, axum::Json(body)).into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    resp
}

impl AuthState {
    /// The token verifier (shared with the task that keeps remote keys fresh).
    pub fn verifier(&self) -> Arc<Verifier> {
        self.verifier.clone()
    }

    /// Auth state with `verifier`, session limits, and `metadata_url`: the absolute URL of
    /// `/.well-known/oauth-protected-resource` (sent in `WWW-Authenticate`). The receiver gets
    /// the ids of sessions the book evicted, for the transport to close.
    pub fn new(
        verifier: Verifier,
        metadata_url: String,
        limits: SessionLimits,
    ) -> (AuthState, Evicted) {
        let (evicted, rx) = tokio::sync::mpsc::channel(EVICTED_QUEUE);
        let state = AuthState {
            verifier: Arc::new(verifier),
            metadata_url,
            exchange_hint: None,
            limits,
            book: Mutex::new(SessionBook::default()),
            evicted,
        };
        (state, Evicted(rx))
    }

    /// Names the token endpoint in every refusal of a token (RFC 8693 exchange).
    pub fn set_exchange_hint(&mut self, token_endpoint: String) {
        self.exchange_hint = Some(token_endpoint);
    }

    fn book(&self) -> std::sync::MutexGuard<'_, SessionBook> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets a transport session (rmcp dropped it: idle timeout, DELETE, shutdown).
    /// Idempotent.
    pub fn forget_session(&self, sid: &str) {
        let mut book = self.book();
        book.use_of.remove(sid);
        if let Some(id) = book.owner.remove(sid)
            && let Some(n) = book.per_identity.get_mut(&id)
        {
            *n -= 1;
            if *n == 0 {
                book.per_identity.remove(&id);
            }
        }
    }

    /// Booked sessions with no request or stream in flight, last used `idle` or more before
    /// `now`.
    pub fn idle_sessions(&self, idle: std::time::Duration, now: Instant) -> Vec<String> {
        self.book()
            .use_of
            .iter()
            .filter(|(_, (last, busy))| *busy == 0 && now.saturating_duration_since(*last) >= idle)
            .map(|(sid, _)| sid.clone())
            .collect()
    }

    /// Whether booked session `sid` has nothing in flight and was last used `idle` or more
    /// before `now`.
    pub fn idle_sessions_of(&self, sid: &str, idle: std::time::Duration, now: Instant) -> bool {
        self.book()
            .use_of
            .get(sid)
            .is_some_and(|(last, busy)| *busy == 0 && now.saturating_duration_since(*last) >= idle)
    }

    /// Whether transport session `sid` is in the book (opened here and not yet forgotten).
    pub fn is_booked(&self, sid: &str) -> bool {
        self.book().owner.contains_key(sid)
    }

    /// Open transport sessions.
    pub fn open_sessions(&self) -> usize {
        self.book().owner.len()
    }

    /// Reserves room for one new session of `id`, or says which limit refuses it. At the
    /// per-identity limit, the identity's least recently used idle session is taken out of the
    /// book and returned, for the caller to close.
    #[expect(
        clippy::result_large_err,
        reason = "the refusal is the HTTP answer itself, built only when a limit refuses"
    )]
    fn reserve(&self, id: &Identity) -> Result<Option<String>, Response> {
        let mut book = self.book();
        if book.owner.len() + book.pending_total >= self.limits.max_total {
            return Err(limit_refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "session limit reached: {} sessions are open on this server (http.max_sessions); retry later",
                    self.limits.max_total
                ),
            ));
        }
        let held = book.per_identity.get(id).copied().unwrap_or(0)
            + book.pending.get(id).copied().unwrap_or(0);
        let mut evicted = None;
        if held >= self.limits.max_per_identity {
            let idle = book
                .owner
                .iter()
                .filter(|(_, o)| *o == id)
                .filter_map(|(sid, _)| {
                    let (last, busy) = book.use_of.get(sid).copied()?;
                    (busy == 0).then_some((last, sid.clone()))
                })
                .min();
            let Some((_, sid)) = idle else {
                return Err(limit_refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "session limit reached: this identity holds {held} open sessions, all in use (http.max_sessions_per_identity = {}); close one with DELETE or reuse it",
                        self.limits.max_per_identity
                    ),
                ));
            };
            book.use_of.remove(&sid);
            book.owner.remove(&sid);
            if let Some(n) = book.per_identity.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    book.per_identity.remove(id);
                }
            }
            evicted = Some(sid);
        }
        *book.pending.entry(id.clone()).or_default() += 1;
        book.pending_total += 1;
        Ok(evicted)
    }

    /// Binds a session that was opened without a reservation to `id`; `false` (and not bound)
    /// when `id` already holds its limit.
    fn adopt(&self, id: &Identity, sid: &str) -> bool {
        let mut book = self.book();
        if book.owner.contains_key(sid) {
            return true;
        }
        let held = book.per_identity.get(id).copied().unwrap_or(0);
        if held >= self.limits.max_per_identity || book.owner.len() >= self.limits.max_total {
            return false;
        }
        book.owner.insert(sid.to_string(), id.clone());
        book.use_of.insert(sid.to_string(), (Instant::now(), 0));
        *book.per_identity.entry(id.clone()).or_default() += 1;
        true
    }

    /// Has session `sid` closed in the transport, by the task that reads [`Evicted`]: a
    /// caller that goes away cannot leave it half closed.
    fn close_later(&self, sid: String) {
        if self.evicted.try_send(sid).is_err() {
            tracing::debug!("eviction queue full: the idle reaper closes the session");
        }
    }

    /// Ends a reservation; binds the new session to `id` when one was created.
    fn settle(&self, id: &Identity, created: Option<&str>) {
        let mut book = self.book();
        book.pending_total -= 1;
        if let Some(n) = book.pending.get_mut(id) {
            *n -= 1;
            if *n == 0 {
                book.pending.remove(id);
            }
        }
        if let Some(sid) = created
            && !book.owner.contains_key(sid)
        {
            book.owner.insert(sid.to_string(), id.clone());
            book.use_of.insert(sid.to_string(), (Instant::now(), 0));
            *book.per_identity.entry(id.clone()).or_default() += 1;
        }
    }

    fn unauthorized(&self, error: Option<&str>) -> Response {
        let challenge = match (error, &self.exchange_hint) {
            (Some(e), Some(endpoint)) => format!(
                "Bearer resource_metadata=\"{}\", error=\"invalid_token\", error_description=\"{e}; exchange the identity provider's token for a session token at {endpoint} (RFC 8693)\"",
                self.metadata_url
            ),
            (Some(e), None) => format!(
                "Bearer resource_metadata=\"{}\", error=\"invalid_token\", error_description=\"{e}\"",
                self.metadata_url
            ),
            (None, _) => format!("Bearer resource_metadata=\"{}\"", self.metadata_url),
        };
        let mut resp = (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response();
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

/// 401 unless the request carries a valid token for this resource; 403 when a transport session
/// is used with another identity's token; 429/503 when a new session would pass a session limit.
/// Otherwise `inner` answers the request, with the caller's identity and grants in its extensions.
pub async fn authorize<F, Fut>(state: &Arc<AuthState>, mut req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
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
    let (identity, grants) = match state.verifier.verify_fresh(token.trim()).await {
        Ok(v) => {
            req.extensions_mut()
                .insert(crate::approval::TokenClaims(std::sync::Arc::new(
                    v.claims.other.clone(),
                )));
            (
                v.identity.clone(),
                crate::auth::Grants::Scopes(v.claims.scopes.clone()),
            )
        }
        Err(e) => {
            static SITE: crate::ratelog::Limiter = crate::ratelog::Limiter::new();
            if let Some(more) = SITE.allow() {
                // At the default level: an operator whose clients all get 401 must see why.
                tracing::warn!(error = %e, suppressed = more, "token refused (401)");
            }
            return state.unauthorized(Some(
                "the token is invalid, expired, or not for this resource",
            ));
        }
    };
    if let Some(conn) = req.extensions().get::<Arc<super::listener::ConnState>>() {
        conn.authenticated();
    }
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(sid) = &session {
        let bound = state.book().owner.get(sid).cloned();
        match bound {
            Some(owner) if owner != identity => {
                static SITE: crate::ratelog::Limiter = crate::ratelog::Limiter::new();
                if let Some(more) = SITE.allow() {
                    tracing::warn!(%owner, caller = %identity, suppressed = more, "transport session used with another identity's token");
                }
                return (
                    StatusCode::FORBIDDEN,
                    "this transport session belongs to another identity\n",
                )
                    .into_response();
            }
            // Every session this server opened is in the book from its first answer on: one
            // that is not was closed, evicted or never ours, and nobody may use it.
            None if state.limits.stateful => {
                return (
                    StatusCode::NOT_FOUND,
                    "no such transport session (closed, expired or evicted); initialize a new one\n",
                )
                    .into_response();
            }
            _ => {}
        }
    }
    let creating = state.limits.stateful
        && session.is_none()
        && req.method() == axum::http::Method::POST
        && !super::protocol::is_sessionless(req.headers().get("mcp-protocol-version"));
    // The reservation is given back if this future is dropped before the answer (a client that
    // resets the stream), so counts cannot drift.
    let mut reservation = None;
    if creating {
        match state.reserve(&identity) {
            Err(refused) => {
                static SITE: crate::ratelog::Limiter = crate::ratelog::Limiter::new();
                if let Some(more) = SITE.allow() {
                    tracing::warn!(caller = %identity, suppressed = more, "new transport session refused by a session limit");
                }
                return refused;
            }
            Ok(evicted) => {
                reservation = Some(Reservation {
                    state: state.clone(),
                    id: identity.clone(),
                    settled: false,
                });
                if let Some(evicted) = evicted {
                    static SITE: crate::ratelog::Limiter = crate::ratelog::Limiter::new();
                    if let Some(more) = SITE.allow() {
                        tracing::info!(caller = %identity, suppressed = more, "http.max_sessions_per_identity reached: closed this identity's least recently used idle session to open a new one");
                    }
                    state.close_later(evicted);
                }
            }
        }
    }
    // A request of a known session marks it in use until its response (or stream) ends.
    let in_use = session.as_ref().and_then(|sid| {
        let mut book = state.book();
        let u = book.use_of.get_mut(sid)?;
        u.0 = Instant::now();
        u.1 += 1;
        Some(InUse {
            state: state.clone(),
            sid: sid.clone(),
        })
    });
    req.extensions_mut().insert(identity.clone());
    req.extensions_mut().insert(grants);
    let resp = inner(req).await;
    let resp = match in_use {
        Some(guard) => resp.map(|inner| {
            axum::body::Body::new(Tracked {
                inner,
                _in_use: guard,
            })
        }),
        None => resp,
    };
    let created = resp
        .status()
        .is_success()
        .then(|| resp.headers().get(SESSION_HEADER))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .filter(|_| session.is_none());
    match reservation.as_mut() {
        Some(r) => {
            r.settled = true;
            state.settle(&identity, created);
        }
        // A session opened by a request that did not look like it would open one (a newer
        // protocol version header on an `initialize`): bound to its identity all the same, and
        // closed at once if that identity is already at its limit.
        None => {
            if let Some(sid) = created
                && state.limits.stateful
                && !state.adopt(&identity, sid)
            {
                tracing::warn!(caller = %identity, "a session opened past http.max_sessions_per_identity was closed");
                state.close_later(sid.to_string());
            }
        }
    }
    resp
}

/// A session slot reserved for an identity while its `initialize` runs; given back on drop
/// unless the answer settled it.
struct Reservation {
    state: Arc<AuthState>,
    id: Identity,
    settled: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.state.settle(&self.id, None);
        }
    }
}
