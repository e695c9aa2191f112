//! Memory per idle stateful session: opens N sessions (each `initialize` with its own token, on
//! a reused keep-alive connection) against a server whose pid is given, and reports the growth of
//! its resident set per session.
//!
//! Usage: `session_mem --url http://127.0.0.1:P/mcp --pid PID --secret S [--sessions 5000]
//! [--settle-ms 3500]` (the wait before the second reading: idle sessions are parked then).
//! Prints one tab-separated line: `sessions rss_before_kib rss_after_kib bytes_per_session`.

use std::time::Duration;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    let mut it = std::env::args().skip(1);
    let (mut url, mut pid, mut secret, mut n) = (String::new(), 0u32, String::new(), 5000usize);
    let mut settle_ms = 3500u64;
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => url = v,
            "--pid" => pid = v.parse()?,
            "--secret" => secret = v,
            "--sessions" => n = v.parse()?,
            "--settle-ms" => settle_ms = v.parse()?,
            other => anyhow::bail!("unknown flag `{other}`"),
        }
    }
    anyhow::ensure!(
        url.starts_with("http://127.0.0.1:"),
        "only http://127.0.0.1 is allowed"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = reqwest::Client::builder().pool_max_idle_per_host(4).build()?;
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mem", "version": "1"}}});
        // Warm-up: allocator arenas, caches, the first connection.
        for i in 0..50 {
            open(&client, &url, &secret, &body, &format!("warm{i}")).await?;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = rss_kib(pid);
        for i in 0..n {
            open(&client, &url, &secret, &body, &format!("m{i}")).await?;
        }
        // Settled: past the server's `http.park_after_ms` (2 s) and a sweep of its reaper.
        tokio::time::sleep(Duration::from_millis(settle_ms)).await;
        let after = rss_kib(pid);
        let per = (after.saturating_sub(before) * 1024) as f64 / n as f64;
        println!("{n}\t{before}\t{after}\t{per:.0}");
        anyhow::Ok(())
    })
}

async fn open(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    body: &serde_json::Value,
    session: &str,
) -> anyhow::Result<()> {
    let claims = bulkhead::auth::mint::MintClaims {
        sub: format!("u-{session}"),
        session_id: session.into(),
        iss: "perf".into(),
        aud: "mcp".into(),
        ttl_secs: 3600,
    };
    let token = bulkhead::auth::mint::mint_hs256(secret.as_bytes(), &claims)?;
    let r = client
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(body)
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "initialize: {}", r.status());
    let _ = r.bytes().await?;
    Ok(())
}
