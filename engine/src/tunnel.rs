//! Reverse tunnels: an isolated instance reaches its state store over connections that arrive.
//!
//! A Kubernetes `none` pod is meant to send nothing out (a NetworkPolicy with no egress at all,
//! DNS included), yet its server needs the PostgreSQL store. So the pod's relay never dials: it
//! accepts *tunnels*, connections a store-side relay (`bulkhead relay --tunnel-dial`, in a pod
//! that may reach the store) opens into it ahead of need. Each connection the server makes to
//! the relay's Unix socket is paired with one idle tunnel; the pod side writes one byte,
//! [`OPEN`], and the dial side then connects to the store and copies both ways. A tunnel that
//! closed while idle is noticed (a read that ends) and skipped. Bytes leave the pod only over
//! connections that came from the dial side, so what the pod holds can reach nothing else.
//!
//! Bounded: the pod side holds at most `max_idle` idle tunnels (more are closed on arrival), a
//! local connection waits at most the connect timeout for one, and relayed connections share
//! the relay's connection limit and idle timeout; the dial side keeps `idle` tunnels to each
//! address the name resolves to, each redialled after a failure with a backoff of at most 10 s.

use crate::endpoint::{Bound, Endpoint};
use crate::relay::{RelayLimits, relay_to, relay_while};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// The byte the pod side sends on a tunnel it puts to use.
pub const OPEN: u8 = 0x01;

/// How often the dial side resolves its name again (pods come and go behind a headless Service).
const RESOLVE_EVERY: Duration = Duration::from_secs(10);

/// The longest wait before a failed tunnel is dialled again.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Limits of a tunnel route.
#[derive(Clone, Copy, Debug)]
pub struct TunnelLimits {
    /// Idle tunnels held by the pod side, or kept open per address by the dial side.
    pub idle: usize,
    /// Limits of the relayed connections (count, connect wait, idle timeout).
    pub relay: RelayLimits,
}

impl Default for TunnelLimits {
    fn default() -> Self {
        TunnelLimits {
            idle: 8,
            relay: RelayLimits::default(),
        }
    }
}

/// How long a tunnel may sit idle before the kernel starts probing it (TCP keepalive), so an idle
/// tunnel outlives connection-tracking timeouts between the pods, and a peer that vanished is
/// noticed.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// Turns on TCP keepalive for a tunnel (best effort: a tunnel without it still works).
fn keep_alive(t: &TcpStream) {
    use rustix::net::sockopt;
    let _ = t.set_nodelay(true);
    let _ = sockopt::set_socket_keepalive(t, true);
    let _ = sockopt::set_tcp_keepidle(t, KEEPALIVE_IDLE);
    let _ = sockopt::set_tcp_keepintvl(t, Duration::from_secs(10));
}

/// Whether an idle tunnel is still open: a peek that would block means nothing arrived and the
/// peer has not closed it (asked of the socket itself, not of the runtime's cached readiness).
fn still_open(t: &TcpStream) -> bool {
    use rustix::net::RecvFlags;
    use std::os::fd::AsFd;
    let mut b = [0u8; 1];
    matches!(
        rustix::net::recv(t.as_fd(), &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Err(rustix::io::Errno::AGAIN)
    )
}

/// The pod side: each connection accepted on `local` is carried over a tunnel accepted on
/// `tunnels`, until `stop` fires.
pub async fn accept_side(
    local: Bound,
    tunnels: TcpListener,
    limits: TunnelLimits,
    stop: CancellationToken,
) {
    let (idle_tx, idle_rx) = mpsc::channel::<TcpStream>(limits.idle.max(1));
    let idle_rx = Arc::new(Mutex::new(idle_rx));
    let take_tunnels = async {
        loop {
            let arrived = tokio::select! {
                r = tunnels.accept() => r,
                _ = stop.cancelled() => return,
            };
            match arrived {
                Ok((t, from)) => {
                    keep_alive(&t);
                    if idle_tx.try_send(t).is_err() {
                        tracing::debug!(%from, "tunnel refused: {} idle already", limits.idle);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "tunnel accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    };
    let slots = Arc::new(Semaphore::new(limits.relay.max_connections.max(1)));
    let serve_local = async {
        loop {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p.expect("never closed"),
                _ = stop.cancelled() => return,
            };
            let mut inbound = tokio::select! {
                r = local.accept() => match r {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = stop.cancelled() => return,
            };
            let idle_rx = idle_rx.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let deadline = tokio::time::Instant::now() + limits.relay.connect_timeout;
                let mut tunnel = loop {
                    let next = tokio::time::timeout_at(deadline, async {
                        idle_rx.lock().await.recv().await
                    })
                    .await;
                    match next {
                        Ok(Some(mut t)) => {
                            if still_open(&t) && t.write_all(&[OPEN]).await.is_ok() {
                                break t;
                            }
                            // closed while idle: the next one
                        }
                        Ok(None) | Err(_) => {
                            tracing::warn!(
                                "no tunnel arrived within {} s: is the store-side relay running?",
                                limits.relay.connect_timeout.as_secs_f64()
                            );
                            return;
                        }
                    }
                };
                relay_while(&mut inbound, &mut tunnel, limits.relay.idle_timeout, &stop).await;
            });
        }
    };
    tokio::join!(take_tunnels, serve_local);
}

/// The dial side: keeps `limits.idle` tunnels open to every address `tunnel` (`host:port`)
/// resolves to; a tunnel put to use ([`OPEN`]) is relayed to `target`, and another is dialled
/// in its place. Runs until `stop` fires.
pub async fn dial_side(
    tunnel: String,
    target: Endpoint,
    limits: TunnelLimits,
    stop: CancellationToken,
) {
    let target = Arc::new(target);
    let slots = Arc::new(Semaphore::new(limits.relay.max_connections.max(1)));
    let mut running: BTreeMap<SocketAddr, CancellationToken> = BTreeMap::new();
    loop {
        match tokio::net::lookup_host(tunnel.as_str()).await {
            Ok(addrs) => {
                let now: std::collections::BTreeSet<SocketAddr> = addrs.collect();
                running.retain(|addr, token| {
                    let keep = now.contains(addr);
                    if !keep {
                        token.cancel();
                    }
                    keep
                });
                for addr in now {
                    if running.contains_key(&addr) {
                        continue;
                    }
                    let token = stop.child_token();
                    for _ in 0..limits.idle.max(1) {
                        tokio::spawn(keep_one(
                            addr,
                            target.clone(),
                            slots.clone(),
                            limits.relay,
                            token.clone(),
                        ));
                    }
                    running.insert(addr, token);
                }
            }
            Err(e) => tracing::warn!(%tunnel, error = %e, "cannot resolve the tunnel's name"),
        }
        tokio::select! {
            () = tokio::time::sleep(RESOLVE_EVERY) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// One idle tunnel to `addr`, dialled again whenever it is put to use or lost.
async fn keep_one(
    addr: SocketAddr,
    target: Arc<Endpoint>,
    slots: Arc<Semaphore>,
    limits: RelayLimits,
    stop: CancellationToken,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let dialled = tokio::select! {
            r = tokio::time::timeout(limits.connect_timeout, TcpStream::connect(addr)) => r,
            _ = stop.cancelled() => return,
        };
        let mut t = match dialled {
            Ok(Ok(t)) => t,
            Ok(Err(_)) | Err(_) => {
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = stop.cancelled() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        keep_alive(&t);
        let mut first = [0u8; 1];
        let opened = tokio::select! {
            r = t.read_exact(&mut first) => r.is_ok() && first[0] == OPEN,
            _ = stop.cancelled() => return,
        };
        if !opened {
            // Closed (the pod restarted, or had idle tunnels enough) or spoke out of turn.
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                _ = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            continue;
        }
        backoff = Duration::from_millis(100);
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%addr, "tunnel refused: {} relayed already", limits.max_connections);
            continue;
        };
        let target = target.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _permit = permit;
            relay_to(&mut t, &target, limits, &stop).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP server on loopback that echoes each connection until the client closes it.
    async fn echo_server() -> SocketAddr {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
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

    /// A local connection crosses a tunnel the pod side accepted, both ways, several at once,
    /// and more than `idle` in a row (each used tunnel is replaced).
    #[tokio::test]
    async fn local_connections_reach_the_target_over_tunnels_that_arrive() {
        let echo = echo_server().await;
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("store.sock");
        let local = Bound::bind(&Endpoint::Unix(sock.clone())).await.unwrap();
        let tunnels = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tunnel_addr = tunnels.local_addr().unwrap();
        let stop = CancellationToken::new();
        let limits = TunnelLimits {
            idle: 2,
            relay: RelayLimits {
                connect_timeout: Duration::from_secs(20),
                ..RelayLimits::default()
            },
        };
        tokio::spawn(accept_side(local, tunnels, limits, stop.clone()));
        tokio::spawn(dial_side(
            tunnel_addr.to_string(),
            Endpoint::Tcp(echo.to_string()),
            limits,
            stop.clone(),
        ));
        let mut clients = Vec::new();
        for i in 0..5u8 {
            let sock = sock.clone();
            clients.push(tokio::spawn(async move {
                let mut c = tokio::net::UnixStream::connect(&sock).await.unwrap();
                let payload = vec![i; 100_000];
                let (mut r, mut w) = c.split();
                let send = async {
                    w.write_all(&payload).await.unwrap();
                    w.shutdown().await.unwrap();
                };
                let mut got = Vec::new();
                let recv = async {
                    tokio::time::timeout(Duration::from_secs(30), r.read_to_end(&mut got))
                        .await
                        .expect("echo in time")
                        .unwrap();
                };
                tokio::join!(send, recv);
                assert_eq!(got, payload);
            }));
        }
        for c in clients {
            c.await.unwrap();
        }
        stop.cancel();
    }

    /// Both sides set TCP keepalive on a tunnel, so an idle one survives connection tracking
    /// and a vanished peer is noticed: the options as the kernel reports them.
    #[tokio::test]
    async fn a_tunnel_is_kept_alive_while_idle() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let t = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        assert!(!rustix::net::sockopt::socket_keepalive(&t).unwrap());
        keep_alive(&t);
        assert!(rustix::net::sockopt::socket_keepalive(&t).unwrap());
        assert_eq!(
            rustix::net::sockopt::tcp_keepidle(&t).unwrap(),
            KEEPALIVE_IDLE
        );
    }

    /// Without a dial side, a local connection is closed after the connect timeout: the pod
    /// side never dials anywhere itself.
    #[tokio::test]
    async fn without_tunnels_a_local_connection_is_closed_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("store.sock");
        let local = Bound::bind(&Endpoint::Unix(sock.clone())).await.unwrap();
        let tunnels = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stop = CancellationToken::new();
        let limits = TunnelLimits {
            idle: 1,
            relay: RelayLimits {
                connect_timeout: Duration::from_millis(500),
                ..RelayLimits::default()
            },
        };
        tokio::spawn(accept_side(local, tunnels, limits, stop.clone()));
        let mut c = tokio::net::UnixStream::connect(&sock).await.unwrap();
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut b))
            .await
            .expect("closed in time")
            .unwrap_or(0);
        assert_eq!(n, 0);
        stop.cancel();
    }

    /// A tunnel that closes while idle is skipped, not handed a connection.
    #[tokio::test]
    async fn a_tunnel_closed_while_idle_is_skipped() {
        let echo = echo_server().await;
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("store.sock");
        let local = Bound::bind(&Endpoint::Unix(sock.clone())).await.unwrap();
        let tunnels = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tunnel_addr = tunnels.local_addr().unwrap();
        let stop = CancellationToken::new();
        let limits = TunnelLimits {
            idle: 4,
            relay: RelayLimits {
                connect_timeout: Duration::from_secs(20),
                ..RelayLimits::default()
            },
        };
        tokio::spawn(accept_side(local, tunnels, limits, stop.clone()));
        // A dead tunnel first: dialled and dropped at once.
        drop(TcpStream::connect(tunnel_addr).await.unwrap());
        tokio::spawn(dial_side(
            tunnel_addr.to_string(),
            Endpoint::Tcp(echo.to_string()),
            limits,
            stop.clone(),
        ));
        let mut c = tokio::net::UnixStream::connect(&sock).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(30), c.read_exact(&mut b))
            .await
            .expect("echo in time")
            .unwrap();
        assert_eq!(&b, b"ping");
        stop.cancel();
    }
}
