//! The HTTP/1 accept loop, bounded: at most `max_connections` at once, a header-read timeout
//! (which is also the idle keep-alive timeout), at most `max_unauthenticated` connections that
//! have not yet sent a valid token (the oldest is dropped to admit a new one), TCP_NODELAY, and a
//! graceful shutdown bounded in time. On TCP or a Unix socket ([`crate::endpoint`]). `axum::serve` sets none of these limits.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Connection limits (`http:` in config.yaml).
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// Most open connections; beyond it, the oldest unauthenticated one is closed to make room, or
    /// (when every connection is authenticated) new ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// Most connections that have not yet presented a valid token; the oldest is closed to
    /// admit a new one.
    pub max_unauthenticated: usize,
    /// Time a client has to send a request's headers, and the longest idle keep-alive gap.
    pub header_read_timeout: Duration,
    /// Largest request head, in bytes.
    pub max_header_bytes: usize,
    /// Longest wait for open connections at shutdown.
    pub shutdown_grace: Duration,
}

impl ConnLimits {
    /// The limits `http:` in config.yaml sets (each at least 1, header timeout at least 100 ms).
    pub fn from_config(http: &crate::config::HttpConfig) -> ConnLimits {
        ConnLimits {
            max_connections: http.max_connections.max(1),
            max_unauthenticated: http.max_unauthenticated_connections.max(1),
            header_read_timeout: Duration::from_millis(http.header_read_timeout_ms.max(100)),
            max_header_bytes: http.max_header_bytes,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 1024,
            max_unauthenticated: 256,
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 << 10,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// One accepted connection, as the auth layer sees it (a request extension).
#[derive(Debug)]
pub struct ConnState {
    id: u64,
    authenticated: AtomicBool,
    close: CancellationToken,
    tracker: Arc<Unauthenticated>,
}

impl ConnState {
    /// Marks the connection as having sent a valid token: it no longer counts against
    /// `max_unauthenticated` and is never dropped to make room.
    pub fn authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            self.tracker.remove(self.id);
        }
    }
}

/// The connections that have not authenticated yet, oldest first.
#[derive(Debug, Default)]
struct Unauthenticated {
    queue: Mutex<VecDeque<(u64, CancellationToken)>>,
    max: usize,
    evicted: AtomicU64,
}

impl Unauthenticated {
    fn admit(&self, id: u64, close: CancellationToken) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back((id, close));
        while q.len() > self.max {
            if let Some((_, oldest)) = q.pop_front() {
                oldest.cancel();
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Closes the oldest unauthenticated connection, if any (to free a connection slot).
    fn evict_oldest(&self) -> bool {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        match q.pop_front() {
            Some((_, oldest)) => {
                oldest.cancel();
                self.evicted.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    fn remove(&self, id: u64) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = q.iter().position(|(c, _)| *c == id) {
            q.remove(i);
        }
    }
}

/// Counters of the accept loop (for metrics and tests).
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Connections open now.
    pub open: AtomicU64,
    /// Unauthenticated connections closed to admit newer ones.
    pub evicted: AtomicU64,
}

/// Serves `app` on `listener` until `shutdown` is cancelled, within `limits`.
pub async fn serve(
    listener: crate::endpoint::Bound,
    app: Router,
    shutdown: CancellationToken,
    limits: ConnLimits,
    stats: Arc<ConnStats>,
) -> std::io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes.max(4096))
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let tracker = Arc::new(Unauthenticated {
        max: limits.max_unauthenticated.max(1),
        ..Default::default()
    });
    let graceful = GracefulShutdown::new();
    let mut next_id = 0u64;
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok(stream) => stream,
                Err(e) => {
                    use std::io::ErrorKind::*;
                    if !matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
                        // Out of descriptors and the like: back off instead of spinning.
                        tracing::error!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        // At the cap, the oldest unauthenticated connection makes room for this one (silent
        // clients cannot hold every slot); when all are authenticated, this one waits.
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                tracker.evict_oldest();
                tokio::select! {
                    p = slots.clone().acquire_owned() => p.expect("never closed"),
                    _ = shutdown.cancelled() => break,
                }
            }
        };
        next_id += 1;
        let conn = Arc::new(ConnState {
            id: next_id,
            authenticated: AtomicBool::new(false),
            close: CancellationToken::new(),
            tracker: tracker.clone(),
        });
        tracker.admit(conn.id, conn.close.clone());
        stats
            .evicted
            .store(tracker.evicted.load(Ordering::Relaxed), Ordering::Relaxed);
        let service = {
            let (app, conn) = (app.clone(), conn.clone());
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(conn.clone());
                let mut app = app.clone();
                async move { tower::Service::call(&mut app, req).await }
            })
        };
        let served = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        let stats = stats.clone();
        stats.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            tokio::select! {
                r = served => if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                },
                _ = conn.close.cancelled() => {
                    tracing::debug!("unauthenticated connection closed to admit a newer one");
                }
            }
            conn.tracker.remove(conn.id);
            stats.open.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the shutdown grace period");
    }
    Ok(())
}
