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
//! in the kernel's backlog), and a connect timeout to the target.

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
}

impl Default for RelayLimits {
    fn default() -> Self {
        RelayLimits {
            max_connections: 1024,
            connect_timeout: Duration::from_secs(5),
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
            let mut outbound =
                match tokio::time::timeout(limits.connect_timeout, connect(&target)).await {
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
            tokio::select! {
                r = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {
                    if let Err(e) = r {
                        tracing::debug!(%target, error = %e, "relayed connection ended with an error");
                    }
                }
                _ = stop.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
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
