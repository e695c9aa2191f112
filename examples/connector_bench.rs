//! Benchmark: a 10-million-row SQLite query and a ~1 GB log search, each run through its
//! connector and `StreamPreview` into a workspace file the way the call wrapper does; prints
//! rows/lines, elapsed time and peak RSS (`VmHWM`).
//!
//! `CARGO_TARGET_DIR=/work/main/target cargo run --release --example connector_bench -- [rows] [log_bytes]`

use std::fmt::Write as _;
use std::io::{BufWriter, Write as _};
use std::sync::Arc;
use std::time::Instant;

use bulkhead::codegen::*;
use bulkhead::connectors::{self, Connectors};
use bulkhead::context::{Presets, StreamPreview};
use bulkhead::identity::Identity;
use bulkhead::server::Chunk;
use bulkhead::workspace::{SessionWorkspace, WorkspaceRoot};
use futures::StreamExt as _;

static DEFS: &[ConnectorDef] = &[
    ConnectorDef {
        secrets: &[],
        name: "records",
        kind: bulkhead_vocab::connector::ConnectorKind::Sqlite,
        sensitivity: Sensitivity::Confidential,
        settings: r#"{"path":"${BENCH_DB}"}"#,
        operations: &[OperationDef {
            name: "all",
            params_schema: r#"{"type":"object","properties":{"min_size":{"type":"integer"}}}"#,
            body: r#"{"sql": {"sql": "SELECT id, title, size FROM records WHERE size >= :min_size ORDER BY id", "writes": false}}"#,
        }],
    },
    ConnectorDef {
        secrets: &[],
        name: "app_logs",
        kind: bulkhead_vocab::connector::ConnectorKind::Logs,
        sensitivity: Sensitivity::Internal,
        settings: r#"{"dir":"${BENCH_LOGS}"}"#,
        operations: &[OperationDef {
            name: "search",
            params_schema: "{}",
            body: r#"{"logs": {"action": "search"}}"#,
        }],
    },
];

fn vm_hwm_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn make_db(path: &std::path::Path, rows: u64) -> anyhow::Result<()> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
         CREATE TABLE records (id INTEGER PRIMARY KEY, title TEXT NOT NULL, size INTEGER);",
    )?;
    conn.execute(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1)
         INSERT INTO records SELECT x, 'customer record number ' || x, x % 1000 FROM c",
        [rows as i64],
    )?;
    Ok(())
}

fn make_logs(dir: &std::path::Path, bytes: u64) -> anyhow::Result<u64> {
    let levels = ["INFO", "WARN", "ERROR", "DEBUG"];
    let (mut written, mut i, mut lines) = (0u64, 0u64, 0u64);
    let mut line = String::with_capacity(200);
    for file in 0..8 {
        let mut f = BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(dir.join(format!("app-{file}.log")))?,
        );
        while written < bytes * (file + 1) / 8 {
            line.clear();
            let s = i / 100; // 100 lines per second from 2026-11-01
            let _ = writeln!(
                line,
                "2026-11-{:02}T{:02}:{:02}:{:02}.{:03}Z {} worker-{} request {i} handled in {}ms path=/api/v1/items/{}",
                1 + (s / 86_400) % 28,
                (s / 3600) % 24,
                (s / 60) % 60,
                s % 60,
                (i % 100) * 10,
                levels[(i % 4) as usize],
                i % 16,
                (i * 7) % 250,
                i % 10_000
            );
            f.write_all(line.as_bytes())?;
            written += line.len() as u64;
            i += 1;
            lines += 1;
        }
        f.flush()?;
    }
    Ok(lines)
}

/// Runs one operation and streams its result through `StreamPreview` into a workspace file.
async fn run(
    c: &Connectors,
    ws: &Arc<SessionWorkspace>,
    preset: &str,
    connector: &str,
    op: &str,
    args: serde_json::Value,
) -> anyhow::Result<()> {
    let presets = Presets::builtin();
    let preset = presets
        .get(preset)
        .ok_or_else(|| anyhow::anyhow!("no preset"))?;
    let start = Instant::now();
    let out = connectors::call(
        c,
        connector,
        op,
        ws,
        args.as_object().cloned().unwrap_or_default(),
        &bulkhead::signals::CallSignals::new(),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let ToolOutput::Stream(mut stream) = out else {
        anyhow::bail!("expected a stream")
    };
    let path = format!("/workspace/results/{connector}-bench.txt");
    let file = ws.create(&path)?;
    let mut sp = StreamPreview::new(preset, None, BufWriter::with_capacity(1 << 16, file));
    let mut items = 0u64;
    while let Some(chunk) = stream.next().await {
        match chunk.map_err(|e| anyhow::anyhow!("{e}"))? {
            Chunk::Row(r) => {
                let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                sp.push_row(&cells)?;
            }
            Chunk::Line(l) => sp.push_line(&l)?,
            Chunk::Bytes(b) => sp.push_chunk(&b)?,
        }
        items += 1;
    }
    let done = sp.finish()?;
    let secs = start.elapsed().as_secs_f64();
    let omitted = done
        .preview
        .as_ref()
        .map(|p| format!("{:?}", p.omitted))
        .unwrap_or_default();
    println!(
        "{connector}.{op}: {items} items, {:.1} MB saved, {secs:.2} s ({:.0} items/s), peak RSS {:.1} MiB; {omitted}",
        done.total_chars as f64 / 1e6,
        items as f64 / secs,
        vm_hwm_mib()
    );
    ws.remove(&path)?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rows: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000_000);
    let log_bytes: u64 = std::env::args()
        .nth(2)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1 << 30);
    let tmp = tempfile::Builder::new()
        .prefix("connector_bench")
        .tempdir_in("/tmp")?;
    let db = tmp.path().join("records.db");
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs)?;

    let t = Instant::now();
    make_db(&db, rows)?;
    println!(
        "setup: {rows} rows in {:.1} s, peak RSS {:.1} MiB",
        t.elapsed().as_secs_f64(),
        vm_hwm_mib()
    );
    let t = Instant::now();
    let lines = make_logs(&logs, log_bytes)?;
    println!(
        "setup: {lines} log lines ({:.2} GB) in {:.1} s, peak RSS {:.1} MiB",
        log_bytes as f64 / 1e9,
        t.elapsed().as_secs_f64(),
        vm_hwm_mib()
    );

    let c = Connectors::new(DEFS, &|name| match name {
        "BENCH_DB" => Some(db.display().to_string()),
        "BENCH_LOGS" => Some(logs.display().to_string()),
        _ => None,
    })?;
    let root = WorkspaceRoot::new(tmp.path().join("workspaces"))?;
    let ws = Arc::new(root.session(&Identity::new("bench", "s1")?)?);

    run(
        &c,
        &ws,
        "sql_query",
        "records",
        "all",
        serde_json::json!({"min_size": 0}),
    )
    .await?;
    run(
        &c,
        &ws,
        "log_search",
        "app_logs",
        "search",
        serde_json::json!({"pattern": "ERROR worker-(2|6) ", "context_lines": 1}),
    )
    .await?;
    run(
        &c,
        &ws,
        "log_search",
        "app_logs",
        "search",
        serde_json::json!({"pattern": "handled in 24[0-9]ms", "since": "2026-11-02T00:00:00Z", "until": "2026-11-03T00:00:00Z"}),
    )
    .await?;
    Ok(())
}
