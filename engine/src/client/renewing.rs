//! A session token that renews itself, and the HTTP client that always sends the current one:
//! `bulkhead connect` signs in once, exchanges per bridge start and refreshes before expiry, so
//! a long desktop session keeps its agent session (and ratchet) without a long-lived token.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;

/// The bearer a client sends: fixed, or renewed in the background.
#[derive(Clone)]
pub enum Credential {
    /// A token given once (`BULKHEAD_TOKEN`).
    Static(String),
    /// A session token the token service refreshes.
    Renewing(Arc<Renewing>),
}

impl Credential {
    /// The token to send now.
    pub fn current(&self) -> String {
        match self {
            Credential::Static(t) => t.clone(),
            Credential::Renewing(r) => r.current(),
        }
    }
}

impl From<&str> for Credential {
    fn from(token: &str) -> Self {
        Credential::Static(token.to_owned())
    }
}

impl From<&String> for Credential {
    fn from(token: &String) -> Self {
        Credential::Static(token.clone())
    }
}

/// A session token and its refresh token, refreshed at three quarters of its life.
pub struct Renewing {
    token: RwLock<String>,
    refresh: std::sync::Mutex<Option<String>>,
    token_endpoint: String,
    http: reqwest::Client,
}

impl Renewing {
    /// Starts renewing `issued` (an answer of the token endpoint at `token_endpoint`) until
    /// `stop`. Without a refresh token the token is kept until it expires.
    pub fn start(
        issued: &crate::sessions::Issued,
        token_endpoint: &str,
        stop: tokio_util::sync::CancellationToken,
    ) -> Arc<Renewing> {
        let me = Arc::new(Renewing {
            token: RwLock::new(issued.access_token.clone()),
            refresh: std::sync::Mutex::new(issued.refresh_token.clone()),
            token_endpoint: token_endpoint.to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client builds"),
        });
        let task = me.clone();
        let first = issued.expires_in;
        tokio::spawn(async move { task.run(first, stop).await });
        me
    }

    /// The token to send now.
    pub fn current(&self) -> String {
        self.token.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn run(&self, mut expires_in: u64, stop: tokio_util::sync::CancellationToken) {
        loop {
            let wait = Duration::from_secs((expires_in.saturating_mul(3) / 4).max(1));
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            let Some(refresh) = self
                .refresh
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            else {
                return;
            };
            match super::login::refresh(&self.http, &self.token_endpoint, &refresh).await {
                Ok(issued) => {
                    *self.token.write().unwrap_or_else(|p| p.into_inner()) = issued.access_token;
                    if issued.refresh_token.is_some() {
                        *self.refresh.lock().unwrap_or_else(|p| p.into_inner()) =
                            issued.refresh_token;
                    }
                    expires_in = issued.expires_in;
                    tracing::info!(expires_in, "session token refreshed");
                }
                // The refresh token itself is refused (expired, or from another key): retrying
                // cannot help; the next start signs in again.
                Err(e) if e.contains("invalid_grant") => {
                    eprintln!(
                        "bulkhead: the session can no longer be refreshed ({e}); restart `bulkhead connect` to sign in again"
                    );
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot refresh the session token; retrying");
                    expires_in = 8;
                }
            }
        }
    }
}

/// rmcp's HTTP client with the bearer taken from a [`Credential`] on every request.
#[derive(Clone)]
pub struct BearerClient {
    inner: reqwest::Client,
    credential: Credential,
}

impl BearerClient {
    /// A client sending `credential`'s current token.
    pub fn new(credential: Credential) -> BearerClient {
        BearerClient {
            inner: reqwest::Client::new(),
            credential,
        }
    }
}

impl StreamableHttpClient for BearerClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth = Some(self.credential.current());
        self.inner
            .post_message(uri, message, session_id, auth, custom_headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let auth = Some(self.credential.current());
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let auth = Some(self.credential.current());
        self.inner
            .delete_session(uri, session_id, auth, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let auth = Some(self.credential.current());
        self.inner
            .get_stream(uri, session_id, last_event_id, auth, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let auth = Some(self.credential.current());
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
