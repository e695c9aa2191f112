//! Transport sessions: rmcp's session manager with a total cap, a hook that forgets every
//! per-session entry of ours when a session ends (idle timeout, DELETE, eviction, shutdown), so
//! nothing keyed by session outlives it, and the idle timeout ([`reap_idle`]).
//!
//! The idle timeout is ours, not rmcp's: most tool calls never reach rmcp's session worker
//! ([`super::direct`] answers them), so its keep-alive timer would end busy sessions. A session
//! is idle when no request or response stream of it has been in flight for `http.session_idle_timeout_s`
//! (the auth layer's book keeps that); an open stream keeps it alive.

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig, SessionTransport,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Why a session could not be created or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The total cap was reached (the auth layer refuses earlier, with 503; this is the backstop).
    #[error("session limit reached: {0} open sessions (http.max_sessions)")]
    Full(usize),
    /// rmcp's own error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// Called with a session's id when it ends (idempotent: rmcp may report one end twice).
pub type OnClose = Arc<dyn Fn(&str) + Send + Sync>;

/// The session manager of one instance.
pub struct Sessions {
    inner: LocalSessionManager,
    max: usize,
    on_close: OnClose,
}

impl Sessions {
    /// At most `max` sessions; one whose `initialize` is not answered within 30 s (or `idle`,
    /// if shorter) is dropped by rmcp, idle ones by [`reap_idle`].
    pub fn new(max: usize, idle: Duration, on_close: OnClose) -> Sessions {
        let mut config = SessionConfig::default();
        config.keep_alive = None;
        config.init_timeout = Some(Duration::from_secs(30).min(idle));
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        Sessions {
            inner,
            max: max.max(1),
            on_close,
        }
    }

    /// Sessions open now.
    pub async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// The ids of the sessions open now.
    pub async fn ids(&self) -> Vec<String> {
        self.inner
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect()
    }
}

/// Closes each session the auth layer evicts, until the auth layer is gone.
pub async fn close_evicted(mut evicted: super::auth::Evicted, sessions: Arc<Sessions>) {
    while let Some(sid) = evicted.0.recv().await {
        let _ = sessions.close_session(&sid.as_str().into()).await;
    }
}

/// Ends the sessions that stayed idle for `idle` (per the auth layer's book), and sessions rmcp
/// holds that never made it into the book (an `initialize` whose answer was lost) after
/// `idle` or a minute, whichever is longer; every `idle / 4` (within 100 ms – 30 s) until `stop`.
/// Also drops `handler`'s log levels of sessions no longer open.
pub async fn reap_idle(
    sessions: Arc<Sessions>,
    auth: Arc<super::auth::AuthState>,
    handler: super::handler::McpServer,
    idle: Duration,
    stop: CancellationToken,
) {
    let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let unbooked_grace = idle.max(Duration::from_secs(60));
    let mut unbooked_since: HashMap<String, Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.cancelled() => return,
        }
        let now = Instant::now();
        let mut ending = auth.idle_sessions(idle, now);
        let open = sessions.ids().await;
        unbooked_since.retain(|sid, _| open.contains(sid));
        for sid in &open {
            if auth.is_booked(sid) {
                unbooked_since.remove(sid);
            } else if now
                .saturating_duration_since(*unbooked_since.entry(sid.clone()).or_insert(now))
                >= unbooked_grace
            {
                ending.push(sid.clone());
            }
        }
        handler.retain_sessions(|sid| open.iter().any(|o| o == sid));
        for sid in ending {
            tracing::debug!(session = %sid, "transport session idle: closed");
            let _ = sessions.close_session(&sid.as_str().into()).await;
            unbooked_since.remove(&sid);
        }
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let open = self.inner.sessions.read().await.len();
        if open >= self.max {
            return Err(SessionsError::Full(open));
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        (self.on_close)(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}
