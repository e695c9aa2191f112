//! Transport sessions: rmcp's session manager with a total cap, a hook that forgets every
//! per-session entry of ours when a session ends (idle timeout, DELETE, eviction, shutdown), so
//! nothing keyed by session outlives it, and the idle timeout ([`reap_idle`]).
//!
//! The idle timeout is ours, not rmcp's: most tool calls never reach rmcp's session worker
//! ([`super::direct`] answers them), so its keep-alive timer would end busy sessions. A session
//! is idle when no request or response stream of it has been in flight for `http.session_idle_timeout_s`
//! (the auth layer's book keeps that); an open stream keeps it alive.
//!
//! # Parked sessions
//!
//! A live rmcp session holds a worker, three tasks and seven channels (about 55–120 KB). One
//! with nothing in flight for `http.park_after_ms` is *parked*: its worker ends, and only its
//! `initialize` parameters stay ([`Parked`], rmcp's session store), with our book entry and
//! log level. Its next request is restored by rmcp, which replays the handshake behind the
//! scenes, so the client sees the same session. Tool calls never need the worker
//! ([`super::direct`]); lists, resources, prompts and the standalone stream restore it.
//! A parked session keeps no resumption history: a `Last-Event-ID` from before the park, and
//! notifications sent while it was parked with no stream open, are gone (a parked session had
//! nothing in flight, so no response is lost).

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig, SessionTransport,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionState, SessionStore,
    SessionStoreError,
};
use std::collections::{HashMap, HashSet};
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

/// What a parked session keeps: its `initialize` parameters (rmcp stores them for every session
/// at its handshake and reads them back to restore one).
#[derive(Default)]
pub struct Parked(std::sync::Mutex<HashMap<String, SessionState>>);

impl Parked {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionState>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }
}

#[async_trait::async_trait]
impl SessionStore for Parked {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        Ok(self.lock().get(id).cloned())
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        self.lock().insert(id.to_owned(), state.clone());
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        self.lock().remove(id);
        Ok(())
    }
}

/// The session manager of one instance.
pub struct Sessions {
    inner: LocalSessionManager,
    max: usize,
    on_close: OnClose,
    parked: Arc<Parked>,
    /// Sessions being parked: rmcp reports the end of their worker as a close, which must not
    /// forget them.
    parking: std::sync::Mutex<HashSet<SessionId>>,
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
            parked: Arc::default(),
            parking: std::sync::Mutex::default(),
        }
    }

    /// The store rmcp keeps `initialize` parameters in and restores parked sessions from.
    pub fn store(&self) -> Arc<Parked> {
        self.parked.clone()
    }

    /// Sessions open now, live or parked.
    pub async fn open(&self) -> usize {
        self.ids().await.len()
    }

    /// Live sessions (with an rmcp worker).
    pub async fn live(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// The ids of the sessions open now, live or parked.
    pub async fn ids(&self) -> Vec<String> {
        let mut ids: HashSet<String> = self
            .inner
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        ids.extend(self.parked.lock().keys().cloned());
        ids.into_iter().collect()
    }

    /// Parks live session `id` (its worker ends; see the module documentation). Only sessions
    /// whose handshake finished (their parameters are stored) are parked.
    pub async fn park(&self, id: &str) -> bool {
        if !self.parked.contains(id) {
            return false;
        }
        let sid: SessionId = id.into();
        if !self.inner.sessions.read().await.contains_key(&sid) {
            return false;
        }
        self.parking_set().insert(sid.clone());
        if self.inner.close_session(&sid).await.is_err() {
            self.parking_set().remove(&sid);
            return false;
        }
        true
    }

    fn parking_set(&self) -> std::sync::MutexGuard<'_, HashSet<SessionId>> {
        self.parking.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Parking this many sessions in one sweep gives freed memory back to the system.
const TRIM_AFTER_PARKING: usize = 16;

/// Returns the allocator's free memory to the system (glibc keeps freed blocks in its arenas, so
/// the resident set would not shrink when sessions are parked); off the async workers.
async fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let _ = tokio::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
        unsafe { nix::libc::malloc_trim(0) };
    })
    .await;
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
    park_after: Option<Duration>,
    stop: CancellationToken,
) {
    let mut tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    if let Some(after) = park_after {
        tick = tick.min((after / 2).max(Duration::from_millis(100)));
    }
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
        for sid in &ending {
            tracing::debug!(session = %sid, "transport session idle: closed");
            let _ = sessions.close_session(&sid.as_str().into()).await;
            unbooked_since.remove(sid);
        }
        if let Some(after) = park_after {
            // Checked again just before each park: a request that arrived meanwhile keeps it live.
            let mut parked = 0usize;
            for sid in auth.idle_sessions(after, Instant::now()) {
                if !ending.contains(&sid) && auth.idle_sessions_of(&sid, after, Instant::now()) {
                    parked += usize::from(sessions.park(&sid).await);
                }
            }
            if parked >= TRIM_AFTER_PARKING {
                give_back_freed_memory().await;
            }
        }
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let open = self.open().await;
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
        if self.parking_set().remove(id) {
            // rmcp reporting the end of a parked session's worker: the session stays.
            return Ok(());
        }
        (self.on_close)(id);
        let parked = self.parked.lock().remove(id.as_ref()).is_some();
        match self.inner.close_session(id).await {
            // A parked session has no worker left to close.
            Err(_) if parked => Ok(()),
            r => Ok(r?),
        }
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(self.inner.restore_session(id).await?)
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
