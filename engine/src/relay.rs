//! Byte relays between endpoints (`bulkhead relay`, and `serve --forward` inside an instance).
//!
//! A compose instance in `proxied` or `none` mode runs with `network_mode: none`: it has only
//! loopback, on every engine (Docker before 25 gives containers on `internal` networks a default
//! route, so a route table could not tell an isolated instance from one with a way out). It serves
//! on a Unix socket on a volume it shares with one relay, which listens on the agents network; a
//! proxied instance reaches its egress proxy through a loopback port it forwards to another socket
//! on a volume, which the relay connects to the squid service. The relay only copies bytes along
//! the routes it was started with: an instance can reach nothing a route does not name.
//!
//! Bounded: at most `max_connections` relayed connections per route at once (further ones wait
//! in the kernel's backlog), a connect timeout to the target, and an idle timeout: a connection
//! that carries no byte either way for `idle_timeout` is closed, so silent clients cannot hold
//! the route's slots for ever (the default, 15 minutes, outlasts the server's own session idle
//! timeout of 10).

use crate::endpoint::{Bound, Endpoint, connect};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// One route: connections accepted on `listen` are relayed to `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Where to accept.
    pub listen: Endpoint,
    /// Where each accepted connection goes.
    pub target: Endpoint,
}

impl FromStr for Route {
    type Err = String;

    /// `LISTEN=TARGET`, e.g. `0.0.0.0:8001=unix:/run/bulkhead/proxied/serve.sock`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (listen, target) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}` is not a route: expected LISTEN=TARGET"))?;
        Ok(Route {
            listen: listen.parse().map_err(|e| format!("{e}"))?,
            target: target.parse().map_err(|e| format!("{e}"))?,
        })
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.listen, self.target)
    }
}

/// Limits of one route.
#[derive(Clone, Copy, Debug)]
pub struct RelayLimits {
    /// Most connections relayed at once.
    pub max_connections: usize,
    /// Longest wait to connect to the target.
    pub connect_timeout: Duration,
    /// Longest silence (no byte either way) before a relayed connection is closed.
    pub idle_timeout: Duration,
}

impl Default for RelayLimits {
    fn default() -> Self {
        RelayLimits {
            max_connections: 1024,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(900),
        }
    }
}

/// Binds every route's listener (all or nothing), so a caller knows they are up before it says so.
pub async fn bind(routes: &[Route]) -> std::io::Result<Vec<(Route, Bound)>> {
    let mut bound = Vec::with_capacity(routes.len());
    for r in routes {
        let l = Bound::bind(&r.listen).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", r.listen))
        })?;
        bound.push((r.clone(), l));
    }
    Ok(bound)
}

/// Relays `route` on `listener` until `stop` fires.
pub async fn run(route: Route, listener: Bound, limits: RelayLimits, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let target = Arc::new(route.target.clone());
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("never closed"),
            _ = stop.cancelled() => return,
        };
        let mut inbound = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(route = %route, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let target = target.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _permit = permit;
            relay_to(&mut inbound, &target, limits, &stop).await;
        });
    }
}

/// Connects to `target` (within the connect timeout) and relays `inbound` to it
/// ([`relay_while`]); a target that is unreachable or slow to accept is logged and `inbound`
/// dropped.
pub(crate) async fn relay_to<S>(
    inbound: &mut S,
    target: &Endpoint,
    limits: RelayLimits,
    stop: &CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut outbound = match tokio::time::timeout(limits.connect_timeout, connect(target)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(%target, error = %e, "relay target unreachable");
            return;
        }
        Err(_) => {
            tracing::warn!(%target, "relay target did not accept in time");
            return;
        }
    };
    relay_while(inbound, &mut outbound, limits.idle_timeout, stop).await;
}

/// Copies both ways between `a` and `b` until both are done, nothing moved for `idle`, or
/// `stop` fires.
pub(crate) async fn relay_while<A, B>(
    a: &mut A,
    b: &mut B,
    idle: Duration,
    stop: &CancellationToken,
) where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::select! {
        r = relay_until_idle(a, b, idle) => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "relayed connection ended");
            }
        }
        _ = stop.cancelled() => {}
    }
}

/// Copies both ways until both sides are done, or nothing moved for `idle` (an error naming it).
async fn relay_until_idle<A, B>(a: &mut A, b: &mut B, idle: Duration) -> std::io::Result<()>
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = tokio::time::Instant::now();
    // Milliseconds since `started` of the last byte moved, either way.
    let last = AtomicU64::new(0);
    let touch = || last.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    async fn pipe<R, W>(r: &mut R, w: &mut W, touch: &(dyn Fn() + Sync)) -> std::io::Result<()>
    where
        R: tokio::io::AsyncRead + Unpin,
        W: tokio::io::AsyncWrite + Unpin,
    {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = r.read(&mut buf).await?;
            if n == 0 {
                return w.shutdown().await;
            }
            w.write_all(&buf[..n]).await?;
            touch();
        }
    }
    let (mut ar, mut aw) = tokio::io::split(a);
    let (mut br, mut bw) = tokio::io::split(b);
    let copy = async {
        tokio::try_join!(
            pipe(&mut ar, &mut bw, &touch),
            pipe(&mut br, &mut aw, &touch)
        )
        .map(|_| ())
    };
    let watch = async {
        loop {
            let quiet = started
                .elapsed()
                .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    };
    tokio::select! {
        r = copy => r,
        () = watch => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no byte either way for {} s (idle timeout)", idle.as_secs_f64()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A TCP server on loopback that echoes each connection until the client closes it.
    async fn echo_server() -> std::net::SocketAddr {
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    #[test]
    fn routes_parse() {
        let r: Route = "0.0.0.0:8001=unix:/run/bulkhead/proxied/serve.sock"
            .parse()
            .unwrap();
        assert_eq!(r.listen, Endpoint::Tcp("0.0.0.0:8001".into()));
        assert_eq!(
            r.target,
            Endpoint::Unix("/run/bulkhead/proxied/serve.sock".into())
        );
        assert_eq!(
            r.to_string(),
            "0.0.0.0:8001=unix:/run/bulkhead/proxied/serve.sock"
        );
        assert!("0.0.0.0:8001".parse::<Route>().is_err());
        assert!("0.0.0.0:8001=relative.sock".parse::<Route>().is_err());
    }

    #[tokio::test]
    async fn bytes_cross_tcp_to_unix_to_tcp_both_ways() {
        // echo server on TCP <- unix relay <- tcp relay <- client
        let echo_addr = echo_server().await;
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("hop.sock");
        let stop = CancellationToken::new();
        let hop: Route = format!("unix:{}=tcp:{echo_addr}", sock.display())
            .parse()
            .unwrap();
        let front = Bound::bind(&"127.0.0.1:0".parse().unwrap()).await.unwrap();
        let front_ep = front.local().unwrap();
        let entry = Route {
            listen: front_ep.clone(),
            target: Endpoint::Unix(sock.clone()),
        };
        let hop_l = Bound::bind(&hop.listen).await.unwrap();
        tokio::spawn(run(hop, hop_l, RelayLimits::default(), stop.clone()));
        tokio::spawn(run(entry, front, RelayLimits::default(), stop.clone()));
        let Endpoint::Tcp(addr) = front_ep else {
            unreachable!("bound on TCP")
        };
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let payload = vec![7u8; 300_000];
        let (mut r, mut w) = c.split();
        let send = async {
            w.write_all(&payload).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let recv = async {
            tokio::time::timeout(Duration::from_secs(20), r.read_to_end(&mut got))
                .await
                .expect("echo in time")
                .unwrap();
        };
        tokio::join!(send, recv);
        assert_eq!(got.len(), payload.len());
        stop.cancel();
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_after_the_idle_timeout_and_a_busy_one_is_not() {
        // Target: accepts and answers each chunk, never closes on its own.
        let echo_addr = echo_server().await;
        let front = Bound::bind(&"127.0.0.1:0".parse().unwrap()).await.unwrap();
        let Endpoint::Tcp(addr) = front.local().unwrap() else {
            unreachable!()
        };
        let route = Route {
            listen: Endpoint::Tcp(addr.clone()),
            target: Endpoint::Tcp(echo_addr.to_string()),
        };
        let limits = RelayLimits {
            // Far above the 100 ms between the busy client's bytes, so a slow machine cannot
            // close it; the silent one is closed after 2 s.
            idle_timeout: Duration::from_secs(2),
            ..RelayLimits::default()
        };
        let stop = CancellationToken::new();
        tokio::spawn(run(route, front, limits, stop.clone()));
        // Busy: a byte every 100 ms for 3 s (longer than the idle timeout) keeps it open.
        let mut busy = tokio::net::TcpStream::connect(&addr).await.unwrap();
        for _ in 0..30 {
            busy.write_all(b"x").await.unwrap();
            let mut b = [0u8; 1];
            tokio::time::timeout(Duration::from_secs(10), busy.read_exact(&mut b))
                .await
                .expect("echoed in time")
                .expect("still open");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Silent: closed by the relay (bounded wait).
        let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buf))
            .await
            .expect("closed within 10 s")
            .unwrap_or(0);
        assert_eq!(n, 0, "the silent connection was closed");
        stop.cancel();
    }

    #[tokio::test]
    async fn a_connection_to_an_unreachable_target_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let front = Bound::bind(&"127.0.0.1:0".parse().unwrap()).await.unwrap();
        let Endpoint::Tcp(addr) = front.local().unwrap() else {
            unreachable!()
        };
        let route = Route {
            listen: Endpoint::Tcp(addr.clone()),
            target: Endpoint::Unix(dir.path().join("nobody.sock")),
        };
        let stop = CancellationToken::new();
        tokio::spawn(run(route, front, RelayLimits::default(), stop.clone()));
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
            .await
            .expect("closed in time")
            .unwrap_or(0);
        assert_eq!(n, 0);
        stop.cancel();
    }
}
