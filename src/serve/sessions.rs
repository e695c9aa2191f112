//! Transport sessions: rmcp's session manager with a total cap, an idle timeout, and a hook that
//! forgets every per-session entry of ours when rmcp drops a session (idle timeout, DELETE,
//! shutdown), so nothing keyed by session outlives it.

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig, SessionTransport,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use std::sync::Arc;
use std::time::Duration;

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
    /// At most `max` sessions, each dropped after `idle` without a message.
    pub fn new(max: usize, idle: Duration, on_close: OnClose) -> Sessions {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
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
