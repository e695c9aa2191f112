//! The servers of the side-by-side benchmark, one process each, all with the same `echo(text)` tool,
//! the same HS256 key (`iss=perf`, `aud=mcp`) and TCP_NODELAY:
//!
//! - `template`: the Bulkhead runtime serving the generated `template` server (`read_file` and
//!   the rest: what users run);
//! - `bulkhead`: the Bulkhead runtime serving a hand-built one-tool server (every guarantee on:
//!   auth, ratchet check, argument validation, context preset, audit);
//! - `rmcp`: a bare rmcp Streamable HTTP server with a `jsonwebtoken` axum middleware;
//! - `axum`: a raw axum POST echo without MCP or auth (the ceiling);
//! - `mint`: prints a token for `sub`/`session_id` (used by the start-up benchmark).
//!
//! Usage: `bench_server <template|bulkhead|rmcp|axum> --secret S [--stateless] [--state DIR]
//! [--store sqlite|postgres://…]`; prints
//! `http://127.0.0.1:<port>/mcp` on stdout once it listens.

mod bare;
mod bulkhead_echo;
mod template;

use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Issuer every benchmark token carries.
pub const ISSUER: &str = "perf";
/// Audience every benchmark token carries.
pub const AUDIENCE: &str = "mcp";

struct Args {
    kind: String,
    secret: String,
    stateful: bool,
    state: std::path::PathBuf,
    store: String,
    port: u16,
    extra: String,
}

fn args() -> anyhow::Result<Args> {
    let mut it = std::env::args().skip(1);
    let kind = it.next().unwrap_or_default();
    let mut a = Args {
        kind,
        secret: "perf-secret-0123456789abcdef0123456789".into(),
        stateful: true,
        state: std::env::temp_dir().join("bulkhead-bench"),
        store: "sqlite".into(),
        port: 0,
        extra: String::new(),
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--secret" => a.secret = it.next().unwrap_or_default(),
            "--stateless" => a.stateful = false,
            "--stateful" => a.stateful = true,
            "--state" => a.state = it.next().unwrap_or_default().into(),
            "--port" => a.port = it.next().unwrap_or_default().parse()?,
            "--store" => a.store = it.next().unwrap_or_default(),
            // Top-level config.yaml sections appended to the bench configuration (e.g.
            // `rate_limits:` or `audit: { chain: false }`).
            "--extra" => a.extra = it.next().unwrap_or_default(),
            other => anyhow::bail!("unknown flag `{other}`"),
        }
    }
    Ok(a)
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    if a.kind == "mint" {
        let claims = bulkhead::auth::mint::MintClaims {
            sub: "bench".into(),
            session_id: "s0".into(),
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            ttl_secs: 3600,
        };
        println!(
            "{}",
            bulkhead::auth::mint::mint_hs256(a.secret.as_bytes(), &claims)?
        );
        return Ok(());
    }
    // Two workers whatever the affinity at start: tokio sizes its default by the CPUs the
    // process may use, so a server started pinned to one CPU would keep one worker when the
    // bench unpins it.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let cancel = CancellationToken::new();
        let app = match a.kind.as_str() {
            "template" => {
                let config = template::config(&a.secret, a.stateful, &a.state, &a.store, &a.extra)?;
                template::router(&config, cancel.clone()).await?
            }
            "bulkhead" => {
                bulkhead_echo::router(
                    &a.secret,
                    a.stateful,
                    &a.state,
                    &a.store,
                    &a.extra,
                    cancel.clone(),
                )
                .await?
            }
            "rmcp" => bare::rmcp_router(&a.secret, a.stateful, cancel.clone()),
            "axum" => bare::axum_echo(),
            other => {
                anyhow::bail!(
                    "unknown server kind `{other}` (template, bulkhead, rmcp, axum, mint)"
                )
            }
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", a.port)).await?;
        println!("http://{}/mcp", listener.local_addr()?);
        let stop = cancel.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
        let serving = bulkhead::serve::http::serve(listener, app, cancel.clone());
        // SIGTERM from the bench script: stop within a bounded time.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = serving => r?,
            _ = term.recv() => {
                cancel.cancel();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    })
}
