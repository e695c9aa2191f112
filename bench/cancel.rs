//! Time from cancel to stop (`scripts/bench`): a release `bulkhead serve template` searches a
//! 1 GiB log for a pattern that never matches; once the first progress notification arrives the
//! client cancels, and the server's reads (`rchar` in `/proc/<pid>/io`, sampled every 1 ms) are
//! watched until they stop. Three ways to cancel: `notifications/cancelled` in a stateful session,
//! the same in stateless serving (routed by Bulkhead's cancellation layer), and dropping a
//! stateless request.
//!
//! Usage: `cancel <path to a release bulkhead binary> [runs]`; prints `key\tvalue` lines.

use std::path::Path;

#[path = "../tests/support/procio.rs"]
mod procio;
use procio::rchar;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SECRET: &str = "cancel-bench-secret-0123456789abcdef012345";

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(exe: &str, dir: &Path, stateful: bool) -> anyhow::Result<Server> {
    let config = dir.join(format!("config-{stateful}.yaml"));
    std::fs::write(
        &config,
        format!(
            "auth:\n  issuer: bench\n  audience: bench\n  keys:\n    - {{ kid: k, alg: HS256, secret: {SECRET} }}\nhttp:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: {stateful}\nstate:\n  dir: state\n  workspaces: workspaces\n"
        ),
    )?;
    let log = dir.join(format!("serve-{stateful}.log"));
    let child = Command::new(exe)
        .args([
            "--config",
            config.to_str().unwrap(),
            "serve",
            "template",
            "--listen",
            "127.0.0.1:0",
        ])
        .current_dir(dir)
        .env("APP_LOG_DIR", dir.join("logs"))
        .env("RECORDS_DB", dir.join("records.db"))
        .env("WEBHOOK_URL", "http://127.0.0.1:9/hook")
        .env("WEBHOOK_REACH_PRIVATE", "127.0.0.0/8")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let mut server = Server {
        child,
        url: String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("/mcp  (health")) {
            server.url = line
                .split(" at ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or_default()
                .to_owned();
            return Ok(server);
        }
        anyhow::ensure!(Instant::now() < deadline, "serve did not start: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn token(session: &str) -> anyhow::Result<String> {
    let claims = bulkhead::auth::mint::MintClaims {
        sub: "bench".into(),
        session_id: session.into(),
        iss: "bench".into(),
        aud: "bench".into(),
        ttl_secs: 600,
    };
    Ok(bulkhead::auth::mint::mint_hs256(
        SECRET.as_bytes(),
        &claims,
    )?)
}

#[derive(Clone, Copy, PartialEq)]
enum How {
    StatefulNotification,
    StatelessNotification,
    StatelessDrop,
}

/// One cancelled search: milliseconds from the cancel to the server's last read.
async fn once(exe: &str, dir: &Path, how: How, n: usize) -> anyhow::Result<f64> {
    let stateful = how == How::StatefulNotification;
    let server = serve(exe, dir, stateful)?;
    let pid = server.child.id();
    let http = reqwest::Client::new();
    let tok = token(&format!("s{n}"))?;
    let post = |body: serde_json::Value, session: Option<&str>| {
        let mut r = http
            .post(&server.url)
            .bearer_auth(&tok)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send()
    };
    let mut session = None;
    if stateful {
        let init = post(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "cancel-bench", "version": "1"}}}),
            None,
        )
        .await?;
        session = init
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        init.bytes().await?;
        post(
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            session.as_deref(),
        )
        .await?;
    }
    let mut resp = post(
        serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "search_logs", "arguments": {"pattern": "NEVER_THERE"},
            "_meta": {"progressToken": "p"}}}),
        session.as_deref(),
    )
    .await?;
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.contains("notifications/progress") {
        anyhow::ensure!(Instant::now() < deadline, "no progress");
        let Some(chunk) = resp.chunk().await? else {
            anyhow::bail!("stream ended: {seen}")
        };
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // Sample from just before the cancel.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut out = Vec::with_capacity(2000);
        for _ in 0..2000 {
            if flag.load(Ordering::Relaxed) {
                break;
            }
            if let Some(r) = rchar(pid) {
                out.push((Instant::now(), r));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        out
    });
    std::thread::sleep(Duration::from_millis(5));
    let cancel_at = Instant::now();
    match how {
        How::StatelessDrop => drop(resp),
        _ => {
            post(
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 7, "reason": "bench"}}),
                session.as_deref(),
            )
            .await?;
        }
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    let last = samples
        .windows(2)
        .filter(|w| w[1].1 > w[0].1)
        .map(|w| w[1].0)
        .next_back()
        .unwrap_or(cancel_at);
    anyhow::ensure!(
        samples
            .last()
            .is_some_and(|s| s.0 > last + Duration::from_millis(300)),
        "reads had not stopped 300 ms before the end of sampling"
    );
    Ok(last.saturating_duration_since(cancel_at).as_secs_f64() * 1000.0)
}

fn main() -> anyhow::Result<()> {
    let exe = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: cancel <bulkhead binary> [runs]"))?;
    // Absolute: the server runs in the temporary folder.
    let exe = std::fs::canonicalize(&exe)?.to_string_lossy().into_owned();
    let runs: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5);
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs"))?;
    procio::write_big_log(&dir.join("logs/app.log"), 1 << 30)?;
    rusqlite::Connection::open(dir.join("records.db"))?.execute_batch(
        "CREATE TABLE records (id INTEGER PRIMARY KEY, title TEXT NOT NULL, owner TEXT NOT NULL);",
    )?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for (name, how) in [
        ("stateful_notification", How::StatefulNotification),
        ("stateless_notification", How::StatelessNotification),
        ("stateless_dropped_request", How::StatelessDrop),
    ] {
        let mut ms = Vec::new();
        for n in 0..runs {
            ms.push(rt.block_on(once(&exe, dir, how, n))?);
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "{name}\t{:.1}\t{:.1}\t{runs}",
            ms[ms.len() / 2],
            ms[ms.len() - 1]
        );
    }
    Ok(())
}
