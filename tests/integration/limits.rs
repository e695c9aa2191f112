//! Everything a client can make grow is bounded, and a refusal names the limit (issue 11): slow
//! and silent connections, connection count, sessions per identity and in total, idle sessions,
//! request bodies, concurrent calls, disk per session; no host path in any tool error.

use super::harness::{SECRET, token};
use bulkhead::auth::Verifier;
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use bulkhead::serve::listener::ConnStats;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub struct Server {
    pub base: String,
    pub addr: std::net::SocketAddr,
    pub stats: Arc<ConnStats>,
    pub dir: tempfile::TempDir,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// An in-process `template` instance whose config adds `extra` YAML under `http:` and the given
/// top-level sections.
pub async fn start(http_extra: &str, sections: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let text = format!(
        "auth:\n  issuer: test-issuer\n  audience: bulkhead-test\n  keys:\n    - {{ kid: dev, alg: HS256, secret: {SECRET} }}\nhttp:\n  allowed_hosts: [localhost, 127.0.0.1]\n{http_extra}state:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n{sections}"
    );
    let config = Config::parse(&text, "test", &|_| None).expect("config");
    let rt = Arc::new(
        bulkhead::serve::runtime(
            &bulkhead_example::servers::PROJECT,
            &config,
            "template",
            NetworkMode::Full,
        )
        .await
        .unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let stop = CancellationToken::new();
    let app = bulkhead::serve::http::router(
        rt,
        Verifier::new(&config.auth).unwrap(),
        &config.auth.issuer,
        &config.http,
        &base,
        stop.clone(),
    );
    let stats = Arc::new(ConnStats::default());
    tokio::spawn(bulkhead::serve::http::serve_with(
        listener,
        app,
        stop.clone(),
        bulkhead::serve::listener::ConnLimits::from_config(&config.http),
        stats.clone(),
    ));
    Server {
        base,
        addr,
        stats,
        dir,
        stop,
    }
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

/// POSTs an `initialize` with a token for `user`/`session`; returns (status, session id, body).
async fn initialize(base: &str, user: &str, session: &str) -> (u16, Option<String>, String) {
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{base}/mcp"))
        .bearer_auth(token(user, session))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize_body())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, sid, r.text().await.unwrap_or_default())
}

/// POSTs `notifications/initialized` in session `sid`: a use of it (202), or 404 once it is gone.
async fn touch(base: &str, user: &str, session: &str, sid: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token(user, session))
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Opens the session's standalone SSE stream (GET) and keeps it open: the session is in use.
async fn hold_stream(base: &str, user: &str, session: &str, sid: &str) -> reqwest::Response {
    let r = reqwest::Client::new()
        .get(format!("{base}/mcp"))
        .bearer_auth(token(user, session))
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "the stream opens");
    r
}

async fn delete(base: &str, user: &str, session: &str, sid: &str) -> u16 {
    reqwest::Client::new()
        .delete(format!("{base}/mcp"))
        .bearer_auth(token(user, session))
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Reads until EOF or `within`; true when the server closed the connection.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_header_is_cut_off_after_the_header_read_timeout() {
    let s = start("  header_read_timeout_ms: 400\n", "").await;
    let addr = s.addr;
    let closed = tokio::task::spawn_blocking(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .unwrap();
        let t = Instant::now();
        let closed = closed_within(&mut c, Duration::from_secs(5));
        (closed, t.elapsed())
    })
    .await
    .unwrap();
    assert!(closed.0, "a slowloris connection stayed open");
    assert!(
        closed.1 < Duration::from_secs(3),
        "closed only after {:?}",
        closed.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_beyond_the_cap_make_room_and_health_stays_reachable() {
    let s = start(
        "  max_unauthenticated_connections: 8\n  header_read_timeout_ms: 30000\n",
        "",
    )
    .await;
    let addr = s.addr;
    let (served, oldest_closed) = tokio::task::spawn_blocking(move || {
        // 50 connections that never send a byte (more than the cap of 8).
        let mut silent: Vec<TcpStream> =
            (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(300));
        // A real request still gets through on a new connection.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        let oldest_closed = closed_within(&mut silent[0], Duration::from_secs(2));
        (out.starts_with("HTTP/1.1 200"), oldest_closed)
    })
    .await
    .unwrap();
    assert!(served, "health check starved by silent connections");
    assert!(oldest_closed, "the oldest silent connection was kept");
    assert!(s.stats.evicted.load(std::sync::atomic::Ordering::Relaxed) >= 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_a_free_slot() {
    let s = start("  max_connections: 3\n  header_read_timeout_ms: 1500\n", "").await;
    let addr = s.addr;
    let tok = token("ana", "s1");
    let waited = tokio::task::spawn_blocking(move || {
        // Three authenticated keep-alive connections hold every slot (a silent one would be
        // dropped to make room instead).
        let held: Vec<TcpStream> = (0..3)
            .map(|_| {
                let mut c = TcpStream::connect(addr).unwrap();
                let body = initialize_body().to_string();
                write!(
                    c,
                    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
                c.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
                let mut buf = [0u8; 4096];
                let n = c.read(&mut buf).unwrap_or(0);
                assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
                c
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        drop(held);
        (out.starts_with("HTTP/1.1 200"), t.elapsed())
    })
    .await
    .unwrap();
    assert!(waited.0, "the fourth connection was never served");
    // Served only once a held connection hit its idle timeout.
    assert!(
        waited.1 >= Duration::from_millis(700),
        "served after {:?}: no connection cap",
        waited.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_per_identity_and_in_total_are_capped_and_freed() {
    let s = start("  max_sessions_per_identity: 2\n  max_sessions: 3\n", "").await;
    let a1 = initialize(&s.base, "ana", "s1").await;
    let a2 = initialize(&s.base, "ana", "s1").await;
    assert_eq!((a1.0, a2.0), (200, 200));
    let (a1, a2) = (a1.1.unwrap(), a2.1.unwrap());
    // a1 is used after a2: a2 is the least recently used.
    assert_eq!(touch(&s.base, "ana", "s1", &a1).await, 202);
    // At the per-identity limit a client that never closes is not locked out: its least
    // recently used idle session makes room, and is gone.
    let a3 = initialize(&s.base, "ana", "s1").await;
    assert_eq!(a3.0, 200, "{a3:?}");
    assert_eq!(
        touch(&s.base, "ana", "s1", &a2).await,
        404,
        "a2 was evicted"
    );
    assert_eq!(touch(&s.base, "ana", "s1", &a1).await, 202, "a1 was not");
    // The total cap is never made room for at another identity's expense.
    let b1 = initialize(&s.base, "ben", "s1").await;
    assert_eq!(b1.0, 200);
    let b2 = initialize(&s.base, "ben", "s1").await;
    assert_eq!(b2.0, 503, "{b2:?}");
    assert!(b2.2.contains("http.max_sessions"), "{}", b2.2);
    // Closing one frees its slot.
    assert_eq!(
        delete(&s.base, "ana", "s1", &a1).await,
        204,
        "DELETE ends the session: 204 No Content"
    );
    let a4 = initialize(&s.base, "ana", "s1").await;
    assert_eq!(a4.0, 200, "{a4:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_in_use_are_never_evicted() {
    let s = start("  max_sessions_per_identity: 1\n", "").await;
    let a1 = initialize(&s.base, "ana", "s1").await;
    assert_eq!(a1.0, 200);
    let a1 = a1.1.unwrap();
    let stream = hold_stream(&s.base, "ana", "s1", &a1).await;
    let a2 = initialize(&s.base, "ana", "s1").await;
    assert_eq!(a2.0, 429, "{a2:?}");
    assert!(
        a2.2.contains("http.max_sessions_per_identity") && a2.2.contains("all in use"),
        "{}",
        a2.2
    );
    assert_eq!(touch(&s.base, "ana", "s1", &a1).await, 202, "a1 lives on");
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_dropped_and_its_bookkeeping_with_it() {
    let s = start("  max_sessions: 1\n  session_idle_timeout_s: 1\n", "").await;
    let first = initialize(&s.base, "ana", "s1").await;
    assert_eq!(first.0, 200);
    assert_eq!(initialize(&s.base, "ben", "s1").await.0, 503);
    // rmcp drops the idle session; the count follows it (bounded wait, not a fixed sleep).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let again = initialize(&s.base, "ben", "s1").await;
        if again.0 == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never freed: {again:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_limit_gets_413() {
    let s = start("  max_body_bytes: 2048\n", "").await;
    let mut big = initialize_body();
    big["params"]["clientInfo"]["name"] = json!("x".repeat(5000));
    let r = reqwest::Client::new()
        .post(format!("{}/mcp", s.base))
        .bearer_auth(token("ana", "s1"))
        .header("accept", "application/json, text/event-stream")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert_eq!(initialize(&s.base, "ana", "s1").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_quota_reaches_the_model_as_a_retryable_error_naming_the_limit() {
    let s = start("", "workspace:\n  max_bytes: 100000\n").await;
    let c = super::harness::client(&format!("{}/mcp", s.base), &token("ana", "s1")).await;
    let big = "y".repeat(60_000);
    let (err, text, _) = super::harness::call(
        &c,
        "write_file",
        json!({"path": "/workspace/a.txt", "content": big}),
    )
    .await;
    assert!(!err, "{text}");
    let (err, text, _) = super::harness::call(
        &c,
        "write_file",
        json!({"path": "/workspace/b.txt", "content": big}),
    )
    .await;
    assert!(
        err && !text.starts_with("[FATAL]") && text.contains("workspace.max_bytes"),
        "{text}"
    );
    assert!(
        !text.contains(s.dir.path().to_str().unwrap()),
        "host path: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_never_carry_host_paths() {
    let s = start("", "").await;
    let dir = s.dir.path().to_str().unwrap().to_owned();
    let c = super::harness::client(&format!("{}/mcp", s.base), &token("ana", "s1")).await;
    let mut texts = Vec::new();
    for (tool, args) in [
        ("read_file", json!({"path": "/workspace/../../etc/passwd"})),
        ("read_file", json!({"path": "/workspace/missing.txt"})),
        (
            "write_file",
            json!({"path": "/workspace/results", "content": "x"}),
        ),
    ] {
        texts.push(super::harness::call(&c, tool, args).await.1);
    }
    // The compliance store's lock file disappears: every call fails closed, without a path.
    std::fs::remove_file(s.dir.path().join("state/sessions-default.lock")).unwrap();
    texts.push(
        super::harness::call(&c, "read_file", json!({"path": "/workspace/a"}))
            .await
            .1,
    );
    for t in &texts {
        assert!(!t.contains(&dir), "host path in {t:?}");
    }
    assert!(texts.last().unwrap().starts_with("[FATAL]"));
}

/// An `initialize` that names the newer protocol version cannot open a session past the
/// per-identity limit or outside the book: such a session is bound to its identity, closed at
/// once past the limit, and a session id this server does not hold is refused (404) to anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_is_opened_outside_the_book() {
    let s = start("  max_sessions_per_identity: 1\n", "").await;
    let a1 = initialize(&s.base, "ana", "s1").await;
    assert_eq!(a1.0, 200);
    let a1 = a1.1.unwrap();
    let _stream = hold_stream(&s.base, "ana", "s1", &a1).await;
    let r = reqwest::Client::new()
        .post(format!("{}/mcp", s.base))
        .bearer_auth(token("ana", "s1"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .json(&{
            let mut b = initialize_body();
            b["params"]["protocolVersion"] = json!("2026-07-28");
            b
        })
        .send()
        .await
        .unwrap();
    // rmcp opens a legacy session for it whatever version it names: this is the path that
    // used to escape the book.
    let sid = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("rmcp opened no session: {} {:?}", r.status(), r.headers()));
    // Opened past the limit: closed, and never usable (bounded wait for the close).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while touch(&s.base, "ana", "s1", &sid).await != 404 {
        assert!(
            std::time::Instant::now() < deadline,
            "the extra session stayed open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(touch(&s.base, "ben", "s1", &sid).await, 404);
    assert_eq!(
        touch(&s.base, "ben", "s1", "00000000-0000-0000-0000-000000000000").await,
        404,
        "an id this server never issued"
    );
    assert_eq!(touch(&s.base, "ana", "s1", &a1).await, 202, "a1 lives on");
}

/// An idle session is parked (its rmcp worker ends) and restored by its next request: the
/// client keeps using the same session id (a list needs rmcp's worker; a call), another identity
/// still cannot use the id, and a DELETE ends it for good. (Raw requests: the official client
/// keeps a standalone stream open, and a session with an open stream is never idle.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_parked_and_restored_unseen_by_its_client() {
    let s = start("  park_after_ms: 100\n", "").await;
    let base = s.base.clone();
    let parked = || async {
        let m = reqwest::get(format!("{base}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        m.lines()
            .find_map(|l| l.strip_prefix("bulkhead_parked_sessions "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(-1.0)
    };
    let wait_parked = || async {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while parked().await < 1.0 {
            assert!(std::time::Instant::now() < deadline, "never parked");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let rpc = |sid: String, body: Value| {
        let base = s.base.clone();
        async move {
            let r = reqwest::Client::new()
                .post(format!("{base}/mcp"))
                .bearer_auth(token("ana", "s1"))
                .header("mcp-session-id", sid)
                .header("mcp-protocol-version", "2025-11-25")
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        }
    };
    let (status, sid, _) = initialize(&s.base, "ana", "s1").await;
    assert_eq!(status, 200);
    let sid = sid.unwrap();
    assert_eq!(touch(&s.base, "ana", "s1", &sid).await, 202);
    wait_parked().await;
    // Restored by a list (which needs rmcp's worker).
    let (status, text) = rpc(
        sid.clone(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("read_file"), "{text}");
    wait_parked().await;
    let (status, text) = rpc(
        sid.clone(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "write_file",
            "arguments": {"path": "/workspace/p.txt", "content": "parked"}}}),
    )
    .await;
    assert!(
        status == 200 && !text.contains("\"isError\":true"),
        "{status} {text}"
    );
    wait_parked().await;
    // The parked session's id is still bound to its identity.
    let other = touch(&s.base, "ben", "s1", &sid).await;
    assert!(
        matches!(other, 403 | 404),
        "another identity used a parked session: {other}"
    );
    assert_eq!(touch(&s.base, "ana", "s1", &sid).await, 202);
    wait_parked().await;
    let deleted = delete(&s.base, "ana", "s1", &sid).await;
    assert!(matches!(deleted, 200 | 202 | 204), "{deleted}");
    assert_eq!(
        touch(&s.base, "ana", "s1", &sid).await,
        404,
        "a deleted parked session"
    );
}
