//! The server's end of a jail's way out: a gate on a Unix socket that lets a jail reach exactly
//! the `host:port` entries its connector declares (`egress:`), and nothing else.
//!
//! # The invariant (enforced here)
//!
//! A byte from a jail reaches another host only through a gate, and a gate opens a connection
//! only when (1) the request names a `host:port` on its connector's `egress` list (an HTTP
//! `CONNECT host:port` or an absolute-form `http://host:port/…` request), and (2) on a `full`
//! instance, every address the name resolves to is the internet ([`bulkhead_vocab::ranges`];
//! an allowlisted IP literal is taken as written, as squid takes it), or, on a `proxied`
//! instance, the instance's egress proxy (squid, the deployment's allowlist, the connector's own
//! list for requests labelled with it, and the same ranges) carries it. A `none` instance opens
//! no gate. Everything else gets `403` naming what was refused.
//!
//! One request, one decision, one destination: a connection carries one request. What goes on
//! is a head written from the parsed request ([`request`]), never the jail's bytes; a head
//! another parser could read differently is refused (400); a forwarded request carries exactly
//! its `Content-Length` and nothing after it; a tunnel opens only after the proxy's `200`, so
//! no byte of the jail's is ever read by the proxy as a request. Who may call a tool whose jail has a gate
//! is decided before the jail starts: such tools are `connect` (`bulkhead check` refuses
//! otherwise), so the token's connect scope and the session's level apply to them as to every
//! `connect` tool.
//!
//! The jail reaches the gate through [`super::forward`], which listens on the jail's own
//! loopback; the gate's socket is the only file of the host's network a jail can open.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bulkhead_vocab::HostPort;
use bulkhead_vocab::ranges;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UnixListener, UnixStream};

use crate::policy::NetworkMode;

mod request;
use bulkhead_vocab::Egress as ModeEgress;
pub use request::CONNECTOR_HEADER;

/// Largest request head a jail may send before the gate decides.
const MAX_HEAD: usize = 16 * 1024;
/// Longest wait for a request head, and for a connection to open.
const WAIT: Duration = Duration::from_secs(10);
/// Connections a gate carries at once.
const MAX_CONNECTIONS: usize = 32;
/// Decisions a gate logs; later ones are counted, and the count logged when the gate closes (a
/// jail may open connections as fast as it likes: the log must not grow with it).
const LOGGED_DECISIONS: u64 = 100;

/// Where a connector's jails may go, and how.
#[derive(Clone, Debug)]
pub struct Egress {
    connector: &'static str,
    allowed: Vec<HostPort>,
    /// The instance's egress proxy (`host:port`), used on `proxied`.
    proxy: Option<String>,
}

/// How a gate reaches what it lets through.
#[derive(Clone, Debug)]
enum Via {
    /// Straight to the destination, refusing names that resolve to special-purpose addresses.
    Direct,
    /// Through the instance's egress proxy (`host:port`), which applies its own allowlist.
    Proxy(String),
    /// Nowhere: the reason, given to every request.
    Nowhere(String),
}

impl Egress {
    /// The egress of `connector`: `entries` are `host:port` (checked like every egress entry);
    /// `lookup` reads the instance's egress proxy (`HTTPS_PROXY`, else `HTTP_PROXY`: how `up`,
    /// compose and Kubernetes give a proxied instance its proxy).
    pub fn new(
        connector: &'static str,
        entries: &[String],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Egress, String> {
        let allowed = entries
            .iter()
            .map(|e| HostPort::parse(e).map_err(|why| format!("settings.egress: `{e}`: {why}")))
            .collect::<Result<Vec<_>, _>>()?;
        let proxy = crate::config::env::egress_proxy_in(lookup);
        Ok(Egress {
            connector,
            allowed,
            proxy,
        })
    }

    /// No way out.
    pub fn none(connector: &'static str) -> Egress {
        Egress {
            connector,
            allowed: Vec::new(),
            proxy: None,
        }
    }

    /// Opens a gate for one jail on an instance in `mode`, or `None` when the connector
    /// declares no egress or the instance has no network (`none`). A gate for a run is open
    /// while the run lasts (the run is a call); see [`Egress::gate_while_calls`] for a
    /// long-lived jail.
    pub fn gate(&self, mode: NetworkMode) -> std::io::Result<Option<Gate>> {
        self.open_gate(mode, false)
    }

    /// A gate for a long-lived jail (an upstream MCP server): it lets a connection through only
    /// while one of the jail's calls is in flight ([`Gate::during_call`]), and closes the
    /// connections it carries when the last call ends; at other times it refuses, and logs
    /// (bounded) what was tried.
    pub fn gate_while_calls(&self, mode: NetworkMode) -> std::io::Result<Option<Gate>> {
        self.open_gate(mode, true)
    }

    fn open_gate(&self, mode: NetworkMode, while_calls: bool) -> std::io::Result<Option<Gate>> {
        if self.allowed.is_empty() {
            return Ok(None);
        }
        let via = match mode.egress() {
            ModeEgress::Nothing => return Ok(None),
            ModeEgress::Direct => Via::Direct,
            ModeEgress::Proxy => match &self.proxy {
                Some(p) => Via::Proxy(p.clone()),
                None => Via::Nowhere(
                    "this proxied instance has no egress proxy (HTTPS_PROXY is not set)".into(),
                ),
            },
        };
        Gate::open(Arc::new(Policy {
            egress: self.clone(),
            via,
            decisions: Default::default(),
            calls: while_calls.then(|| tokio::sync::watch::channel(0usize).0),
        }))
        .map(Some)
    }
}

struct Policy {
    egress: Egress,
    via: Via,
    /// Decisions made so far (the first [`LOGGED_DECISIONS`] are logged).
    decisions: std::sync::atomic::AtomicU64,
    /// For a long-lived jail: its calls in flight (the gate is open while there is one).
    calls: Option<tokio::sync::watch::Sender<usize>>,
}

impl Policy {
    /// Whether this decision is one of those logged.
    fn log_this(&self) -> bool {
        self.decisions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            < LOGGED_DECISIONS
    }
}

impl Policy {
    /// Whether a connection may be carried now.
    fn open_now(&self) -> bool {
        self.calls.as_ref().is_none_or(|c| *c.borrow() > 0)
    }

    /// Resolves when no call is in flight any more (never for a run's gate).
    async fn closed(&self) {
        match &self.calls {
            Some(c) => {
                let mut rx = c.subscribe();
                let _ = rx.wait_for(|n| *n == 0).await;
            }
            None => std::future::pending().await,
        }
    }
}

impl Drop for Policy {
    fn drop(&mut self) {
        let n = *self.decisions.get_mut();
        if n > LOGGED_DECISIONS {
            tracing::info!(
                connector = self.egress.connector,
                not_logged = n - LOGGED_DECISIONS,
                "egress decisions not logged"
            );
        }
    }
}

/// A gate's socket, in a private folder of its own; the gate stops when this is dropped.
pub struct Gate {
    dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
    policy: Arc<Policy>,
}

/// A call in flight on a long-lived jail: its gate is open while one exists.
pub struct CallOpen {
    policy: Arc<Policy>,
}

impl Drop for CallOpen {
    fn drop(&mut self) {
        if let Some(c) = &self.policy.calls {
            c.send_modify(|n| *n = n.saturating_sub(1));
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Gate {
    fn open(policy: Arc<Policy>) -> std::io::Result<Gate> {
        let dir = tempfile::Builder::new()
            .prefix("bulkhead-egress-")
            .tempdir()?;
        let listener = UnixListener::bind(dir.path().join("egress.sock"))?;
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let kept = policy.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    let mut conn = conn;
                    let _ = reply(
                        &mut conn,
                        "503 Service Unavailable",
                        &format!(
                            "bulkhead: limit reached: {MAX_CONNECTIONS} connections of this jail are open"
                        ),
                    )
                    .await;
                    continue;
                };
                let policy = policy.clone();
                tokio::spawn(async move {
                    // A long-lived jail's connection ends with the last call in flight (one
                    // that finds none is refused by `serve` itself, with its 403).
                    if !policy.open_now() {
                        serve(conn, &policy).await;
                        drop(slot);
                        return;
                    }
                    tokio::select! {
                        () = serve(conn, &policy) => {}
                        () = policy.closed() => {
                            if policy.log_this() {
                                tracing::info!(
                                    connector = policy.egress.connector,
                                    "egress closed: no call of the jail is in flight any more"
                                );
                            }
                        }
                    }
                    drop(slot);
                });
            }
        });
        Ok(Gate {
            dir,
            task,
            policy: kept,
        })
    }

    /// Marks a call in flight on this gate's jail until the guard is dropped (a run's gate is
    /// always open; the guard then does nothing).
    pub fn during_call(&self) -> CallOpen {
        if let Some(c) = &self.policy.calls {
            c.send_modify(|n| *n += 1);
        }
        CallOpen {
            policy: self.policy.clone(),
        }
    }

    /// The folder holding the gate's socket (bound into the jail at
    /// [`super::forward::SOCKET_DIR`]).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// One connection, one request: read its head, decide, connect, send on the head written from
/// what was decided ([`request`]), then carry the tunnel (`CONNECT`) or exactly the request's
/// body and its response. Nothing the jail sends after that request reaches anyone.
async fn serve(mut conn: UnixStream, policy: &Policy) {
    let connector = policy.egress.connector;
    if !policy.open_now() {
        if policy.log_this() {
            tracing::warn!(
                connector,
                "egress refused: no call of the jail is in flight (an upstream reaches out only while one of its calls runs)"
            );
        }
        let _ = reply(
            &mut conn,
            "403 Forbidden",
            &format!(
                "bulkhead: `{connector}` reaches out only while one of its calls runs, and none does now"
            ),
        )
        .await;
        return;
    }
    let head = match tokio::time::timeout(WAIT, read_head(&mut conn)).await {
        Ok(Ok(h)) => h,
        Ok(Err(why)) => {
            let _ = reply(&mut conn, "400 Bad Request", &format!("bulkhead: {why}")).await;
            return;
        }
        Err(_) => return,
    };
    let req = match request::parse(&head.bytes[..head.end]) {
        Ok(r) => r,
        Err(why) => {
            if policy.log_this() {
                tracing::warn!(connector, reason = %why, "egress refused: a request the gate does not carry");
            }
            let _ = reply(&mut conn, "400 Bad Request", &format!("bulkhead: {why}")).await;
            return;
        }
    };
    let target = &req.target;
    let Some(entry) = policy
        .egress
        .allowed
        .iter()
        .find(|a| a.host.eq_ignore_ascii_case(&target.host) && a.port == target.port)
    else {
        if policy.log_this() {
            tracing::warn!(connector, target = %target, "egress refused: not declared");
        }
        let list: Vec<String> = policy
            .egress
            .allowed
            .iter()
            .map(|a| a.to_string())
            .collect();
        let _ = reply(
            &mut conn,
            "403 Forbidden",
            &format!(
                "bulkhead: `{connector}` may not reach {}: its `egress` allows {}",
                req.authority(),
                list.join(", ")
            ),
        )
        .await;
        return;
    };
    let upstream = match &policy.via {
        Via::Nowhere(why) => Err(("403 Forbidden", format!("bulkhead: {why}"))),
        Via::Proxy(proxy) => tokio::time::timeout(WAIT, TcpStream::connect(proxy.as_str()))
            .await
            .map_err(|_| {
                (
                    "504 Gateway Timeout",
                    "bulkhead: the egress proxy did not answer".into(),
                )
            })
            .and_then(|r| {
                r.map_err(|e| {
                    (
                        "502 Bad Gateway",
                        format!("bulkhead: the egress proxy cannot be reached: {e}"),
                    )
                })
            }),
        Via::Direct => direct(entry).await,
    };
    let mut upstream = match upstream {
        Ok(u) => u,
        Err((status, why)) => {
            if policy.log_this() {
                tracing::warn!(connector, target = %target, reason = %why, "egress refused");
            }
            let _ = reply(&mut conn, status, &why).await;
            return;
        }
    };
    if policy.log_this() {
        tracing::info!(connector, target = %target, "egress opened");
    }
    let rest = &head.bytes[head.end..head.len];
    let proxied = matches!(policy.via, Via::Proxy(_));
    match req.kind {
        request::Kind::Connect => {
            if proxied {
                if upstream.write_all(&req.for_proxy(connector)).await.is_err() {
                    return;
                }
                // The tunnel opens only once the proxy says so: nothing of the jail's reaches
                // the proxy before, so no byte of it is read as a request.
                match tokio::time::timeout(WAIT, read_head(&mut upstream)).await {
                    Ok(Ok(answer)) => {
                        let opened = answer.bytes[..answer.end].starts_with(b"HTTP/1.1 2")
                            || answer.bytes[..answer.end].starts_with(b"HTTP/1.0 2");
                        if conn.write_all(&answer.bytes[..answer.len]).await.is_err() || !opened {
                            let _ = conn.shutdown().await;
                            return;
                        }
                    }
                    _ => {
                        let _ = reply(
                            &mut conn,
                            "502 Bad Gateway",
                            "bulkhead: the egress proxy did not answer the CONNECT",
                        )
                        .await;
                        return;
                    }
                }
            } else if conn
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            if upstream.write_all(rest).await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
            }
        }
        request::Kind::Forward { .. } => {
            let head = if proxied {
                req.for_proxy(connector)
            } else {
                req.for_origin()
            };
            if upstream.write_all(&head).await.is_err() {
                return;
            }
            forward_once(conn, upstream, rest, req.body, connector, policy).await;
        }
    }
}

/// Carries exactly `body` bytes of the jail's (those of `rest` first) and the whole answer
/// back, at once (a client may wait for `100 Continue`); then closes. Bytes after the body (a
/// pipelined request) are dropped.
async fn forward_once(
    conn: UnixStream,
    upstream: TcpStream,
    rest: &[u8],
    body: u64,
    connector: &str,
    policy: &Policy,
) {
    let (mut from_jail, mut to_jail) = conn.into_split();
    let (mut from_up, mut to_up) = upstream.into_split();
    let first = rest.len().min(usize::try_from(body).unwrap_or(usize::MAX));
    if rest.len() > first && policy.log_this() {
        tracing::warn!(
            connector,
            dropped = rest.len() - first,
            "egress: bytes after the request dropped (one request per connection)"
        );
    }
    let first = rest[..first].to_vec();
    let send = async move {
        if to_up.write_all(&first).await.is_err() {
            return;
        }
        let mut left = (&mut from_jail).take(body - first.len() as u64);
        let _ = tokio::io::copy(&mut left, &mut to_up).await;
        // Held open (not shut down): some servers close on a half-closed request.
        let _held = to_up;
        std::future::pending::<()>().await;
    };
    let answer = async move {
        let _ = tokio::io::copy(&mut from_up, &mut to_jail).await;
        let _ = to_jail.shutdown().await;
    };
    tokio::select! {
        () = send => {}
        () = answer => {}
    }
}

/// Resolves `entry` and connects to its first address, unless a name resolves to a
/// special-purpose address (an IP literal on the list is taken as written, as squid takes it).
async fn direct(entry: &HostPort) -> Result<TcpStream, (&'static str, String)> {
    let literal = entry.host.parse::<IpAddr>().is_ok();
    let addrs: Vec<std::net::SocketAddr> = match tokio::time::timeout(
        WAIT,
        tokio::net::lookup_host((entry.host.as_str(), entry.port)),
    )
    .await
    {
        Ok(Ok(a)) => a.collect(),
        Ok(Err(e)) => {
            return Err((
                "502 Bad Gateway",
                format!("bulkhead: {} does not resolve: {e}", entry.host),
            ));
        }
        Err(_) => {
            return Err((
                "504 Gateway Timeout",
                format!("bulkhead: {} did not resolve in time", entry.host),
            ));
        }
    };
    if !literal
        && let Some((ip, r)) = addrs
            .iter()
            .find_map(|a| ranges::refused(a.ip(), &[]).map(|r| (a.ip(), r)))
    {
        return Err((
            "403 Forbidden",
            format!(
                "bulkhead: {} resolves to {ip}, which is {}",
                entry.host, r.what
            ),
        ));
    }
    let mut last = format!("bulkhead: {} has no address", entry.host);
    for a in addrs {
        match tokio::time::timeout(WAIT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = format!("bulkhead: {entry} cannot be reached: {e}"),
            Err(_) => last = format!("bulkhead: {entry} did not answer in time"),
        }
    }
    Err(("502 Bad Gateway", last))
}

struct Head {
    bytes: Vec<u8>,
    /// End of the head (after the blank line).
    end: usize,
    /// Bytes read in all.
    len: usize,
}

async fn read_head(conn: &mut (impl tokio::io::AsyncRead + Unpin)) -> Result<Head, String> {
    let mut bytes = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        if let Some(i) = bytes[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Head {
                bytes,
                end: i + 4,
                len,
            });
        }
        if len == MAX_HEAD {
            return Err(format!(
                "limit reached: a request head of more than {MAX_HEAD} bytes"
            ));
        }
        let n = conn
            .read(&mut bytes[len..])
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the request ended before its head".into());
        }
        len += n;
    }
}

async fn reply(conn: &mut UnixStream, status: &str, text: &str) -> std::io::Result<()> {
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}\n",
        text.len() + 1
    );
    conn.write_all(msg.as_bytes()).await?;
    conn.shutdown().await
}
