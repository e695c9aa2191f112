//! Start-up time: from spawning `bulkhead serve template --listen 127.0.0.1:0` (release binary) to
//! the first answered `/healthz` and the first answered authenticated MCP `initialize`.
//!
//! Usage: `startup <path/to/bulkhead> [runs]`. Prints tab-separated
//! `what runs median_ms min_ms max_ms` lines. State lives in a temp dir; every wait is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "bench-startup-secret-0123456789abcdef";

fn request(addr: &str, raw: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(raw.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn once(bin: &str, dir: &std::path::Path, token: &str) -> anyhow::Result<(f64, f64)> {
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args(["serve", "template", "--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env("BULKHEAD_STATE_DIR", dir.join("state"))
        .env("BULKHEAD_WORKSPACES", dir.join("workspaces"))
        .env("BULKHEAD_DEV_SECRET", SECRET)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let result = (|| {
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stderr"))?;
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines
                .next()
                .ok_or_else(|| anyhow::anyhow!("server exited before printing its URL"))??;
            if let Some(rest) = line.split("at http://").nth(1) {
                break rest.split('/').next().unwrap_or_default().to_string();
            }
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(10),
                "no URL within 10 s"
            );
        };
        std::thread::spawn(move || for _ in lines {});
        let health = request(
            &addr,
            &format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        )?;
        let t_health = start.elapsed().as_secs_f64() * 1e3;
        anyhow::ensure!(health.starts_with("HTTP/1.1 200"), "healthz: {health}");
        let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"startup","version":"0"}}}"#;
        let init = request(
            &addr,
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )?;
        anyhow::ensure!(
            init.starts_with("HTTP/1.1 200") && init.contains("serverInfo"),
            "initialize: {init}"
        );
        Ok((t_health, start.elapsed().as_secs_f64() * 1e3))
    })();
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            child.kill()?;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.wait();
    result
}

fn stats(label: &str, mut v: Vec<f64>) {
    v.sort_by(f64::total_cmp);
    println!(
        "{label}\t{}\t{:.1}\t{:.1}\t{:.1}",
        v.len(),
        v[v.len() / 2],
        v[0],
        v[v.len() - 1]
    );
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let bin = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: startup <bulkhead binary> [runs]"))?;
    let runs: usize = args
        .next()
        .map(|r| r.parse())
        .transpose()?
        .unwrap_or(10)
        .clamp(1, 100);
    let claims = bulkhead::auth::mint::MintClaims {
        sub: "bench".into(),
        session_id: "startup".into(),
        iss: "bulkhead-dev".into(),
        aud: "bulkhead".into(),
        ttl_secs: 600,
    };
    let token = bulkhead::auth::mint::mint_hs256(SECRET.as_bytes(), &claims)?;
    let dir = tempfile::tempdir()?;
    let (mut health, mut init) = (Vec::new(), Vec::new());
    for i in 0..runs {
        // Alternate fresh and existing state: the first start creates the store and audit log.
        let (h, n) = once(&bin, dir.path(), &token)?;
        if i > 0 {
            health.push(h);
            init.push(n);
        }
    }
    if health.is_empty() {
        anyhow::bail!("need at least 2 runs (the first, creating state, is not counted)");
    }
    stats("healthz", health);
    stats("initialize", init);
    Ok(())
}
