//! Benchmark: a call of a real upstream MCP server (`mcp-server-time` from PyPI, its
//! `get_current_time`) through Bulkhead (`Runtime::call` of `third_party.current_time`: the
//! wrapper, the pin check, the `mcp` connector's stdio client) beside the same upstream called
//! directly by an rmcp client over stdio, sequentially, in one run. The difference per call is
//! the policy layer's overhead.
//!
//! Usage: `upstream_bench [calls]` with `MCP_SERVER_TIME` naming the upstream's executable;
//! prints `key\tvalue` lines (µs and calls/s).

#[path = "inproc.rs"]
mod inproc;

use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One measured round: every call's latency and the calls per second.
type Round = (Vec<Duration>, f64);

const SECRET: &str = "upstream-bench-secret-0123456789abcdef0123456";

fn main() -> anyhow::Result<()> {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let bin = std::env::var("MCP_SERVER_TIME")
        .map_err(|_| anyhow::anyhow!("set MCP_SERVER_TIME to the mcp-server-time executable"))?;
    let dir = tempfile::tempdir()?;
    let config = inproc::config(dir.path(), SECRET)?;
    let tokio = inproc::tokio()?;
    tokio.block_on(async {
        let rt = Arc::new(
            bulkhead::serve::runtime(
                &bulkhead_example::servers::PROJECT,
                &config,
                "third_party",
                NetworkMode::Full,
            )
            .await?,
        );
        let id = Identity::new("bench", "s1")?;
        let args = json!({"timezone": "Europe/Paris"});
        let through = |rt: Arc<bulkhead::call::Runtime>| {
            let (id, args) = (id.clone(), args.clone());
            async move {
                let t = Instant::now();
                let out = rt
                    .call(&id, "current_time", args.as_object().cloned())
                    .await;
                assert!(!out.is_error, "{}", out.text);
                t.elapsed()
            }
        };
        let mut child = tokio::process::Command::new(&bin)
            .args(["--local-timezone", "UTC"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        // The same protocol era Bulkhead settles on with this upstream (2026-07-28).
        let direct = rmcp::ClientServiceExt::serve_with_lifecycle(
            (),
            (stdout, stdin),
            rmcp::ClientLifecycleMode::Auto {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                legacy_version: Some(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
        )
        .await?;
        let call_direct = || {
            let params = rmcp::model::CallToolRequestParams::new("get_current_time")
                .with_arguments(args.as_object().cloned().unwrap());
            let peer = direct.peer().clone();
            async move {
                let t = Instant::now();
                let r = peer.call_tool(params).await.expect("direct call");
                assert!(!r.is_error.unwrap_or(false));
                t.elapsed()
            }
        };
        // Warm both (the upstream's start, the page cache).
        for _ in 0..20 {
            through(rt.clone()).await;
            call_direct().await;
        }
        let (mut best_b, mut best_d): (Option<Round>, Option<Round>) = (None, None);
        for _ in 0..3 {
            let started = Instant::now();
            let mut b = Vec::with_capacity(calls);
            for _ in 0..calls {
                b.push(through(rt.clone()).await);
            }
            let br = calls as f64 / started.elapsed().as_secs_f64();
            let started = Instant::now();
            let mut d = Vec::with_capacity(calls);
            for _ in 0..calls {
                d.push(call_direct().await);
            }
            let dr = calls as f64 / started.elapsed().as_secs_f64();
            b.sort();
            d.sort();
            if best_b.as_ref().is_none_or(|x| br > x.1) {
                best_b = Some((b, br));
            }
            if best_d.as_ref().is_none_or(|x| dr > x.1) {
                best_d = Some((d, dr));
            }
        }
        let ((b, br), (d, dr)) = (best_b.unwrap(), best_d.unwrap());
        println!("bulkhead_p50_us\t{:.0}", inproc::pct(&b, 0.5));
        println!("bulkhead_p99_us\t{:.0}", inproc::pct(&b, 0.99));
        println!("bulkhead_calls_per_s\t{br:.0}");
        println!("direct_p50_us\t{:.0}", inproc::pct(&d, 0.5));
        println!("direct_p99_us\t{:.0}", inproc::pct(&d, 0.99));
        println!("direct_calls_per_s\t{dr:.0}");
        println!(
            "overhead_p50_us\t{:.0}",
            inproc::pct(&b, 0.5) - inproc::pct(&d, 0.5)
        );
        println!("ratio\t{:.2}", br / dr);
        anyhow::Ok(())
    })
}
