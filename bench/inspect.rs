//! Benchmark of inspection (issue 54): the scanner's throughput on three kinds of 4 KB results,
//! and `read_file` of a 4 KB file through the call wrapper with inspection on and off, side by
//! side in one run (alternating, the order reversed every other round).
//!
//! Usage: `inspect_bench [rounds]`; prints `key\tvalue` lines.

#[path = "inproc.rs"]
mod inproc;

use bulkhead::codegen::*;
use bulkhead::identity::Identity;
use bulkhead::inspect::Rules;
use bulkhead::policy::NetworkMode;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const READ_SCHEMA: &str = r#"{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":4096}},"required":["path"],"additionalProperties":false}"#;
const WRITE_SCHEMA: &str = r#"{"type":"object","properties":{"content":{"type":"string","maxLength":16777216},"path":{"type":"string","minLength":1,"maxLength":4096}},"required":["content","path"],"additionalProperties":false}"#;

/// `read_file` and `write_file` as the template declares them, with the given inspection.
const fn tool(name: &'static str, read: bool, inspection: Inspection) -> ToolDef {
    ToolDef {
        name,
        title: None,
        description: "bench",
        permission: if read {
            Permission::Read
        } else {
            Permission::Write
        },
        context: "default",
        sensitivity: Sensitivity::Internal,
        annotations: Annotations {
            read_only: read,
            destructive: !read,
            idempotent: true,
            open_world: false,
        },
        input_schema: if read { READ_SCHEMA } else { WRITE_SCHEMA },
        output_schema: None,
        dataset: "workspace",
        rate_limit: None,
        approval: None,
        inspection,
        bound: &[],
        target: Target::Connector {
            connector: "workspace",
            operation: if read { "read" } else { "write" },
        },
    }
}

const OFF: Inspection = Inspection::Off {
    reason: "the benchmark's baseline: the same call without inspection",
};
static ON_TOOLS: [ToolDef; 2] = [
    tool("read_file", true, Inspection::On),
    tool("write_file", false, Inspection::On),
];
static OFF_TOOLS: [ToolDef; 2] = [tool("read_file", true, OFF), tool("write_file", false, OFF)];
static ON: ServerDef = ServerDef {
    name: "inspected",
    instructions: "",
    tools: &ON_TOOLS,
    resources: &[],
    prompts: &[],
    presets: &[],
};
static OFF_DEF: ServerDef = ServerDef {
    name: "uninspected",
    instructions: "",
    tools: &OFF_TOOLS,
    resources: &[],
    prompts: &[],
    presets: &[],
};
static SERVERS: [&ServerDef; 2] = [&ON, &OFF_DEF];

fn server(name: &str) -> Option<bulkhead::server::Server> {
    let def = SERVERS.iter().find(|s| s.name == name)?;
    Some(bulkhead::server::Server::new(
        def,
        bulkhead_example::servers::PROJECT.connectors,
        bulkhead::server::NoHandlers,
    ))
}

static PROJECT: bulkhead::project::Project = bulkhead::project::Project {
    servers: &SERVERS,
    connectors: &[],
    deployments: &[],
    server,
    config: None,
};

/// A 4 KB file of log lines: what a `read_file` usually returns (no credential in it).
fn log_4k() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 4096 - 80 {
        s.push_str(&format!(
            "2026-12-02T10:{:02}:{:02}Z INFO request {i} GET /api/accounts/{i} 200 in 12 ms\n",
            i / 60 % 60,
            i % 60
        ));
        i += 1;
    }
    s
}

/// 4 KB of a JSON API result, full of the keywords that make the generic rule run.
fn json_4k() -> String {
    let mut rows = Vec::new();
    while serde_json::to_string(&rows).unwrap().len() < 4096 - 200 {
        let i = rows.len();
        rows.push(json!({"id": i, "author": "ana", "api_version": "2024-06-01", "token_count": 512 + i, "access": "read", "client": "web", "key": format!("k{i}")}));
    }
    serde_json::to_string(&rows).unwrap()
}

/// 4 KB of a config file with the issue's three credentials in it.
fn creds_4k() -> String {
    let mut s = String::from(
        "[default]\naws_access_key_id = AKIAUJZDE8GXD6NCF10E\naws_secret_access_key = eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5\nsession = eyJhbGciOiAiUlMyNTYiLCAia2lkIjogImstMjAyNi0xMSIsICJ0eXAiOiAiSldUIn0.eyJzdWIiOiAiYW5hIiwgImF1ZCI6ICJjcm0iLCAiZXhwIjogMTg5MzQ1NjAwMH0.xJu2jGjNGkTfi3oYv2DzaKG05Rk-GQV81rkmghzem9yPVUJa_c5q52RYfLWrLoevhZC0x0awirH_juQbLifxz5\n",
    );
    while s.len() < 4096 - 40 {
        s.push_str("region = eu-west-1\noutput = json\n");
    }
    s
}

/// MB/s of `Rules::find` over `text`, repeated for at least one second (bounded: 200,000 scans).
fn scan_rate(rules: &Rules, text: &str) -> (f64, usize) {
    let started = Instant::now();
    let (mut bytes, mut scans, mut found) = (0usize, 0usize, 0usize);
    while started.elapsed() < Duration::from_secs(1) && scans < 200_000 {
        found = rules.find(text.as_bytes()).len();
        bytes += text.len();
        scans += 1;
    }
    (bytes as f64 / started.elapsed().as_secs_f64() / 1e6, found)
}

/// Calls/s of `read_file` for `secs` at concurrency `c` (bounded: 500,000 calls).
async fn calls(rt: Arc<bulkhead::call::Runtime>, c: usize, secs: f64) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..c {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            let id = Identity::new("bench", format!("s{w}")).unwrap();
            let args = json!({"path": "/workspace/log.txt"});
            let mut n = 0usize;
            while started.elapsed().as_secs_f64() < secs && n < 500_000 / c {
                let out = rt.call(&id, "read_file", args.as_object().cloned()).await;
                assert!(!out.is_error, "{}", out.text);
                n += 1;
            }
            n
        }));
    }
    let mut n = 0;
    for t in tasks {
        n += t.await.unwrap();
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(5), |s| s.parse())?;
    let t = Instant::now();
    let rules = Rules::get()?;
    println!("rules\t{}", rules.len());
    println!("compile_ms\t{:.1}", t.elapsed().as_secs_f64() * 1e3);
    for (name, text) in [
        ("log", log_4k()),
        ("json", json_4k()),
        ("credentials", creds_4k()),
    ] {
        let (rate, found) = scan_rate(rules, &text);
        println!("scan_{name}\t{rate:.1}\t{found}");
    }
    let dir = tempfile::tempdir()?;
    let config = inproc::config(dir.path(), "inspect-bench-secret-0123456789abcdef01")?;
    inproc::tokio()?.block_on(async {
        let on = Arc::new(
            bulkhead::serve::runtime(&PROJECT, &config, "inspected", NetworkMode::Full).await?,
        );
        let off = Arc::new(
            bulkhead::serve::runtime(&PROJECT, &config, "uninspected", NetworkMode::Full).await?,
        );
        let file = log_4k();
        for rt in [&on, &off] {
            for w in 0..8 {
                let id = Identity::new("bench", format!("s{w}")).unwrap();
                let out = rt
                    .call(
                        &id,
                        "write_file",
                        json!({"path": "/workspace/log.txt", "content": file})
                            .as_object()
                            .cloned(),
                    )
                    .await;
                assert!(!out.is_error, "{}", out.text);
            }
        }
        for c in [1usize, 8] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for r in 0..rounds {
                if r % 2 == 0 {
                    a.push(calls(on.clone(), c, 1.0).await);
                    b.push(calls(off.clone(), c, 1.0).await);
                } else {
                    b.push(calls(off.clone(), c, 1.0).await);
                    a.push(calls(on.clone(), c, 1.0).await);
                }
            }
            let (a, b) = (median(a), median(b));
            println!("read_file_c{c}\t{a:.0}\t{b:.0}\t{:.3}", a / b);
        }
        anyhow::Ok(())
    })?;
    Ok(())
}
