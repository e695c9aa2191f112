//! Progress, client logging and cancellation against a real `bulkhead serve` process, driven by
//! the official MCP Python SDK: a search over a 1 GiB log reports progress and a warning for a
//! skipped file, the SDK cancels it, and the server's reads (`rchar` in `/proc/<pid>/io`, sampled
//! every 10 ms) stop within 200 ms; no result file is left and the audit says `cancelled`.
//! Run once with stateful sessions (the SDK sends `notifications/cancelled`) and once stateless
//! (one plain JSON reply when nothing streams; the SDK cancels by closing the request).

use crate::procs::{Deployment, Store, token};
#[path = "../support/procio.rs"]
mod procio;
use procio::rchar;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The log searched (1 GiB of lines that never match).
const BIG: u64 = 1 << 30;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Samples a process's `rchar` every 10 ms until stopped: (unix time, bytes read so far).
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(f64, u64)>>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            // Bounded: at most 10 minutes of samples.
            for _ in 0..60_000 {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if let Some(r) = rchar(pid) {
                    out.push((now(), r));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            out
        });
        Sampler { stop, thread }
    }

    fn finish(self) -> Vec<(f64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                pending.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// A deployment whose log directory holds `app.log`, a 1 GiB `big.log` and a link leading out;
/// returns it with the total size of the searchable files.
async fn deployment(stateful: bool) -> (Deployment, u64) {
    let dep = Deployment::new(Store::Sqlite, "progress").await;
    if !stateful {
        let text = std::fs::read_to_string(&dep.config).unwrap();
        std::fs::write(
            &dep.config,
            text.replace("stateful: true", "stateful: false"),
        )
        .unwrap();
    }
    let logs = dep.path().join("logs");
    let big = logs.join("big.log");
    tokio::task::spawn_blocking(move || procio::write_big_log(&big, BIG))
        .await
        .unwrap()
        .unwrap();
    // A link out of the log directory: skipped, with a warning naming only the link.
    std::os::unix::fs::symlink(&dep.config, logs.join("zz-outside.log")).unwrap();
    let total: u64 = ["app.log", "big.log"]
        .iter()
        .map(|f| std::fs::metadata(logs.join(f)).unwrap().len())
        .sum();
    (dep, total)
}

/// The last time the sampled reads grew, within `window_end`; and bytes read before/after `at`.
fn reads_around(samples: &[(f64, u64)], from: f64, at: f64, window_end: f64) -> (f64, u64, u64) {
    let window: Vec<(f64, u64)> = samples
        .iter()
        .copied()
        .filter(|(t, _)| *t >= from && *t <= window_end)
        .collect();
    let at_cancel = window
        .iter()
        .take_while(|(t, _)| *t <= at)
        .last()
        .map(|s| s.1)
        .unwrap();
    let last_increase = window
        .windows(2)
        .filter(|w| w[1].1 > w[0].1)
        .map(|w| w[1].0)
        .next_back()
        .unwrap();
    (
        last_increase,
        at_cancel - window[0].1,
        window.last().unwrap().1 - at_cancel,
    )
}

async fn a_cancelled_search_stops_at_once(stateful: bool) {
    let python = tokio::task::spawn_blocking(crate::python_sdk::venv_python)
        .await
        .unwrap();
    let (dep, total) = deployment(stateful).await;
    let proc = dep.start("full", None);
    let sampler = Sampler::start(proc.child.id());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/progress_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(python)
            .arg(script)
            .arg(&proc.url)
            .arg(token("py-progress", "s1"))
            .output(),
    )
    .await
    .expect("the python client finishes")
    .unwrap();
    let samples = sampler.finish();
    assert!(
        out.status.success(),
        "python client failed:\n{}\nserver:\n{}",
        String::from_utf8_lossy(&out.stderr),
        proc.stderr()
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("client prints JSON");
    eprintln!("protocol {} (stateful: {stateful})", seen["protocol"]);

    // Progress: bytes read of the files' total, increasing, with a message.
    assert_eq!(seen["set_level"], "ok", "{seen}");
    let progress = seen["progress"].as_array().unwrap();
    assert!(progress.len() >= 2, "{seen}");
    let dones: Vec<f64> = progress
        .iter()
        .map(|p| p["done"].as_f64().unwrap())
        .collect();
    assert!(
        dones.windows(2).all(|w| w[0] < w[1]),
        "increasing: {dones:?}"
    );
    assert!(
        progress
            .iter()
            .all(|p| p["total"].as_f64() == Some(total as f64)),
        "{seen}"
    );
    assert!(
        progress[0]["message"].as_str().unwrap().contains(" read"),
        "{seen}"
    );
    // The warning: the skipped link by name, no host path, no argument value.
    let logs_seen = seen["logs"].as_array().unwrap();
    let warning = logs_seen
        .iter()
        .find(|l| l["level"] == "warning" && l["logger"] == "bulkhead")
        .unwrap_or_else(|| panic!("a warning: {seen}"));
    let text = warning["data"].to_string();
    assert!(
        text.contains("zz-outside.log") && text.contains("search_logs"),
        "{text}"
    );
    assert!(!text.contains(&dep.path().display().to_string()), "{text}");
    assert!(!text.contains("NEEDLE"), "no argument values: {text}");

    // Cancelled: no result, and the server stopped reading within 200 ms.
    assert_eq!(seen["finished"], serde_json::json!({}), "{seen}");
    assert!(
        seen["after_text"].is_string(),
        "the server answers after a cancel: {seen}"
    );
    let cancel_at = seen["cancel_at"].as_f64().unwrap();
    let started_at = seen["started_at"].as_f64().unwrap();
    let (last_increase, before, read_after) =
        reads_around(&samples, started_at, cancel_at, cancel_at + 0.9);
    // Speed-independent: it had read something and had not finished the file.
    assert!(
        before > 0 && before + read_after < BIG,
        "the search was reading before the cancel: {samples:?}"
    );
    let stop_after = last_increase - cancel_at;
    eprintln!(
        "cancel → last read: {:.0} ms (sampled every 10 ms); {} KiB read after the cancel; {} MiB read before it",
        stop_after * 1000.0,
        read_after >> 10,
        before >> 20
    );
    assert!(
        stop_after < 0.2,
        "reads went on {:.0} ms after the cancel",
        stop_after * 1000.0
    );
    // (The store's marker file lives at the root of the workspaces; anything else is a result.)
    let left: Vec<PathBuf> = files_under(&dep.path().join("workspaces"))
        .into_iter()
        .filter(|p| !p.ends_with(".bulkhead-store"))
        .collect();
    assert!(left.is_empty(), "no result file left behind: {left:?}");
    let audit = dep.audit().await;
    assert!(
        audit.iter().any(|r| r["tool"] == "search_logs"
            && r["phase"] == "outcome"
            && r["outcome"] == "cancelled"),
        "audit says cancelled: {audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_a_cancelled_search_stops_at_once_after_progress_and_warnings() {
    a_cancelled_search_stops_at_once(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_a_cancelled_search_stops_at_once_after_progress_and_warnings() {
    a_cancelled_search_stops_at_once(false).await;
}

/// Stateless serving, a plain HTTP client: the call streams progress (SSE, since a progress token
/// was sent), the client drops the response mid-search, and the server stops reading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_a_dropped_request_stops_its_search() {
    let (dep, _) = deployment(false).await;
    let proc = dep.start("full", None);
    let sampler = Sampler::start(proc.child.id());
    let pid = proc.child.id();
    let baseline = rchar(pid).unwrap_or(0);
    let started_at = now();
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "search_logs", "arguments": {"pattern": "NEVER_THERE"},
                   "_meta": {"progressToken": "p-7"}}
    });
    let mut resp = reqwest::Client::new()
        .post(&proc.url)
        .bearer_auth(token("raw-client", "s1"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", proc.stderr());
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        ctype.starts_with("text/event-stream"),
        "progress needs a stream: {ctype}"
    );
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !seen.contains("notifications/progress") {
        assert!(std::time::Instant::now() < deadline, "no progress: {seen}");
        let chunk = resp
            .chunk()
            .await
            .unwrap()
            .expect("the stream stays open while searching");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"progressToken\":\"p-7\""), "{seen}");
    // Drop mid-search: wait (bounded) until the search has read a MiB, whatever the machine's
    // speed, rather than assume it has.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while rchar(pid).unwrap_or(0) < baseline + (1 << 20) {
        assert!(
            std::time::Instant::now() < deadline,
            "the search never read 1 MiB"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(resp);
    let dropped_at = now();
    tokio::time::sleep(Duration::from_millis(900)).await;
    let samples = sampler.finish();
    let (last_increase, before, after) =
        reads_around(&samples, started_at, dropped_at, dropped_at + 0.85);
    assert!(
        before > 0 && before + after < BIG,
        "the search was reading and had not finished: {samples:?}"
    );
    let stop_after = last_increase - dropped_at;
    eprintln!(
        "drop → last read: {:.0} ms; {} KiB after, {} MiB before",
        stop_after * 1000.0,
        after >> 10,
        before >> 20
    );
    assert!(
        stop_after < 0.2,
        "reads went on {:.0} ms after the drop",
        stop_after * 1000.0
    );
    let audit = dep.audit().await;
    assert!(
        audit
            .iter()
            .any(|r| r["tool"] == "search_logs" && r["outcome"] == "cancelled"),
        "audit says cancelled: {audit:?}"
    );
}
