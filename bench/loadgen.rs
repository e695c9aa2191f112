//! Streamable HTTP load generator: per session one HTTP/1.1 keep-alive connection with a bearer
//! token, `initialize` + `notifications/initialized` (keeping `Mcp-Session-Id` when the server
//! gives one), then `tools/call echo` (or `--tool` with `--args`) in a loop until the time or the
//! call budget runs out; `--setup-tool`/`--setup-args`: one call per session first (not measured).
//!
//! Usage: `loadgen --url http://127.0.0.1:P/mcp --secret S --concurrency 32 [--secs 3]
//! [--max-calls N] [--label NAME] [--raw] [--tool NAME --args JSON]
//! [--setup-tool NAME --setup-args JSON]`. `--raw` skips the MCP checks (axum echo ceiling).
//! Prints one tab-separated line:
//! `label concurrency calls errors secs calls_per_s p50_ms p99_ms loadgen_cpu_pct`.
//! Runs on one thread, so `loadgen_cpu_pct` near 100 means the generator is the bottleneck.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROTOCOL: &str = "2025-11-25";

struct Args {
    url: String,
    secret: String,
    concurrency: usize,
    secs: f64,
    max_calls: u64,
    label: String,
    raw: bool,
    tool: String,
    args: String,
    setup: Option<(String, String)>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        url: String::new(),
        secret: "perf-secret-0123456789abcdef0123456789".into(),
        concurrency: 1,
        secs: 3.0,
        max_calls: 1_000_000,
        label: "run".into(),
        raw: false,
        tool: "echo".into(),
        args: r#"{"text":"hello bulkhead"}"#.into(),
        setup: None,
    };
    let mut setup_tool = None;
    let mut setup_args = "{}".to_string();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("`{flag}` needs a value"))
        };
        match flag.as_str() {
            "--url" => a.url = val()?,
            "--secret" => a.secret = val()?,
            "--concurrency" => a.concurrency = val()?.parse()?,
            "--secs" => a.secs = val()?.parse()?,
            "--max-calls" => a.max_calls = val()?.parse()?,
            "--label" => a.label = val()?,
            "--raw" => a.raw = true,
            "--tool" => a.tool = val()?,
            "--args" => a.args = val()?,
            "--setup-tool" => setup_tool = Some(val()?),
            "--setup-args" => setup_args = val()?,
            other => anyhow::bail!("unknown flag `{other}`"),
        }
    }
    for json in [&a.args, &setup_args] {
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(json)
            .map_err(|e| anyhow::anyhow!("arguments must be a JSON object: {e}"))?;
    }
    a.setup = setup_tool.map(|t| (t, setup_args));
    anyhow::ensure!(
        a.url.starts_with("http://127.0.0.1:"),
        "only http://127.0.0.1 is allowed"
    );
    anyhow::ensure!(
        a.concurrency >= 1 && a.secs > 0.0 && a.secs <= 60.0,
        "bad bounds"
    );
    Ok(a)
}

/// One MCP session on one keep-alive connection.
struct Session {
    send: SendRequest<Full<Bytes>>,
    host: String,
    path: String,
    token: String,
    session_id: Option<String>,
    raw: bool,
    /// The `tools/call` body before and after its id.
    call: (String, String),
}

impl Session {
    async fn connect(a: &Args, index: usize) -> anyhow::Result<Session> {
        let rest = &a.url["http://".len()..];
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let stream = tokio::net::TcpStream::connect(host).await?;
        stream.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let claims = bulkhead::auth::mint::MintClaims {
            sub: "bench".into(),
            session_id: format!("s{index}"),
            iss: "perf".into(),
            aud: "mcp".into(),
            ttl_secs: 3600,
        };
        let token = bulkhead::auth::mint::mint_hs256(a.secret.as_bytes(), &claims)?;
        let mut s = Session {
            send,
            host: host.to_string(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            token: format!("Bearer {token}"),
            session_id: None,
            raw: a.raw,
            call: call_body(&a.tool, &a.args),
        };
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL}","capabilities":{{}},"clientInfo":{{"name":"bulkhead-loadgen","version":"0.1"}}}}}}"#
        );
        let (status, sid, body) = s.post(init.into_bytes(), false).await?;
        anyhow::ensure!(
            status == 200,
            "initialize: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
        s.session_id = sid;
        if !s.raw {
            check(&body, 0)?;
        }
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec();
        let (status, _, body) = s.post(note, true).await?;
        anyhow::ensure!(
            status == 202 || status == 200,
            "notifications/initialized: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
        Ok(s)
    }

    async fn post(
        &mut self,
        body: Vec<u8>,
        after_init: bool,
    ) -> anyhow::Result<(u16, Option<String>, Bytes)> {
        let mut req = Request::post(self.path.as_str())
            .header("host", self.host.as_str())
            .header("authorization", self.token.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if after_init {
            req = req.header("mcp-protocol-version", PROTOCOL);
        }
        if let Some(sid) = &self.session_id {
            req = req.header("mcp-session-id", sid.as_str());
        }
        self.send.ready().await?;
        let resp = self
            .send
            .send_request(req.body(Full::new(Bytes::from(body)))?)
            .await?;
        let status = resp.status().as_u16();
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, sid, body))
    }

    async fn call(&mut self, id: u64) -> anyhow::Result<()> {
        let req = format!("{}{id}{}", self.call.0, self.call.1);
        let (status, _, body) = self.post(req.into_bytes(), true).await?;
        anyhow::ensure!(
            status == 200,
            "tools/call: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
        if !self.raw {
            check(&body, id)?;
        }
        Ok(())
    }
}

/// A `tools/call` of `tool` with `args`, split around its id.
fn call_body(tool: &str, args: &str) -> (String, String) {
    let name = serde_json::Value::String(tool.to_string());
    (
        r#"{"jsonrpc":"2.0","id":"#.to_string(),
        format!(r#","method":"tools/call","params":{{"name":{name},"arguments":{args}}}}}"#),
    )
}

/// The JSON-RPC response with `id` (plain JSON or inside SSE `data:` lines) is a non-error result.
fn check(body: &[u8], id: u64) -> anyhow::Result<()> {
    let text = std::str::from_utf8(body)?;
    let candidates: Vec<&str> = if text.trim_start().starts_with('{') {
        vec![text]
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|l| l.starts_with('{'))
            .collect()
    };
    for c in candidates {
        let v: serde_json::Value = serde_json::from_str(c)?;
        if v.get("id").and_then(serde_json::Value::as_u64) != Some(id) {
            continue;
        }
        let result = v
            .get("result")
            .ok_or_else(|| anyhow::anyhow!("JSON-RPC error: {c}"))?;
        anyhow::ensure!(
            result.get("isError") != Some(&serde_json::Value::Bool(true)),
            "tool error: {c}"
        );
        return Ok(());
    }
    anyhow::bail!("no response with id {id} in: {text}")
}

/// User + system CPU seconds of this process (`/proc/self/stat`, USER_HZ = 100 on Linux).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat(5); `after` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn main() -> anyhow::Result<()> {
    let a = Arc::new(args()?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut sessions = Vec::with_capacity(a.concurrency);
        for i in 0..a.concurrency {
            let mut s = Session::connect(&a, i).await?;
            if let Some((tool, args)) = &a.setup {
                let body = s.call.clone();
                s.call = call_body(tool, args);
                s.call(u64::MAX / 2).await?;
                s.call = body;
            }
            sessions.push(s);
        }
        let budget = Arc::new(std::sync::atomic::AtomicU64::new(a.max_calls));
        let cpu0 = cpu_secs();
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(a.secs);
        let mut tasks = Vec::new();
        for mut s in sessions {
            let budget = budget.clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(65536);
                let mut errors = 0u64;
                let mut first_error = None;
                let mut id = 1u64;
                while Instant::now() < deadline
                    && budget
                        .fetch_update(
                            std::sync::atomic::Ordering::Relaxed,
                            std::sync::atomic::Ordering::Relaxed,
                            |b| b.checked_sub(1),
                        )
                        .is_ok()
                {
                    let t = Instant::now();
                    match s.call(id).await {
                        Ok(()) => lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32),
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| e.to_string());
                            if errors > 100 {
                                break;
                            }
                        }
                    }
                    id += 1;
                }
                (lat, errors, first_error)
            }));
        }
        let mut lat = Vec::new();
        let mut errors = 0;
        let mut first_error = None;
        for t in tasks {
            let (l, e, f) = t.await?;
            lat.extend(l);
            errors += e;
            first_error = first_error.or(f);
        }
        let wall = start.elapsed().as_secs_f64();
        let cpu = cpu_secs() - cpu0;
        lat.sort_unstable();
        if let Some(e) = first_error {
            eprintln!("loadgen {}: {errors} errors, first: {e}", a.label);
        }
        println!(
            "{}\t{}\t{}\t{}\t{:.2}\t{:.0}\t{:.3}\t{:.3}\t{:.0}",
            a.label,
            a.concurrency,
            lat.len(),
            errors,
            wall,
            lat.len() as f64 / wall,
            percentile(&lat, 0.50),
            percentile(&lat, 0.99),
            100.0 * cpu / wall
        );
        Ok(())
    })
}
