//! The code sandbox (`run_python` of the template server, connector kind `sandbox`) against a
//! real bubblewrap: what a script can and cannot reach, each limit named when hit, and the
//! ratchet stopping a running jail before an escalating call returns its data.
//!
//! Every attack here is a script a model could send; each fails (or is bounded) because of the
//! jail, not because of the script.

use bulkhead::audit::{AuditLog, AuditOptions};
use bulkhead::call::{CallOutcome, Runtime};
use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use bulkhead::state::{StateStore, StoreOptions};
use bulkhead::workspace::WorkspaceRoot;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One deployment's files in a temporary folder: a state store, per-mode workspace layers.
pub struct Env {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub store: Arc<StateStore>,
}

pub fn env() -> Env {
    assert!(
        Path::new("/usr/bin/bwrap").exists() || std::env::var_os("BULKHEAD_BWRAP").is_some(),
        "bubblewrap is needed (scripts/test installs Debian's `bubblewrap`)"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let store = Arc::new(
        StateStore::create_sqlite(&root.join("state/compliance.db"), StoreOptions::new("template"))
            .unwrap(),
    );
    Env {
        _dir: dir,
        root,
        store,
    }
}

fn layer(env: &Env, mode: NetworkMode) -> PathBuf {
    env.root.join(format!("workspaces/{}", mode.as_str()))
}

/// The template server on an instance of `mode`, with the layers of less isolated instances
/// below its own (as `bulkhead serve` sets them up).
pub fn runtime(env: &Env, mode: NetworkMode) -> Runtime {
    let mut lower: Vec<PathBuf> = NetworkMode::needed_for(bulkhead::policy::Sensitivity::Secret)
        .filter(|m| m.index() < mode.index())
        .map(|m| layer(env, m))
        .collect();
    lower.reverse();
    let workspaces = WorkspaceRoot::new(layer(env, mode))
        .unwrap()
        .with_lower(lower);
    let audit = AuditLog::open_file(
        &env.root.join(format!("state/audit-{}.jsonl", mode.as_str())),
        AuditOptions::default(),
    )
    .unwrap();
    Runtime::new(
        bulkhead::servers::server("template").unwrap(),
        mode,
        bulkhead::context::Presets::builtin(),
        workspaces,
        env.store.clone(),
        audit,
    )
    .unwrap()
}

pub fn id(user: &str, session: &str) -> Identity {
    Identity::new(user, session).unwrap()
}

pub async fn py(rt: &Runtime, who: &Identity, code: &str) -> CallOutcome {
    rt.call(who, "run_python", json!({ "code": code }).as_object().cloned())
        .await
}

/// The script's result (`exit_code`, `stdout`, `stderr`, `limit`), the call must have succeeded.
fn result(out: &CallOutcome) -> Value {
    assert!(!out.is_error, "{}", out.text);
    out.structured.clone().unwrap_or_else(|| serde_json::from_str(&out.text).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_runs_over_the_session_workspace() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ana = id("ana", "s1");
    let w = rt
        .call(&ana, "write_file", json!({"path": "/workspace/in.csv", "content": "a,b\n1,2\n"}).as_object().cloned())
        .await;
    assert!(!w.is_error, "{}", w.text);
    let out = py(
        &rt,
        &ana,
        "import csv, os\nrows = list(csv.reader(open('in.csv')))\nopen('out.txt', 'w').write(str(len(rows)))\nprint(os.getcwd(), rows[1])",
    )
    .await;
    let r = result(&out);
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["stdout"], "/workspace ['1', '2']\n", "{r}");
    let back = rt
        .call(&ana, "read_file", json!({"path": "/workspace/out.txt"}).as_object().cloned())
        .await;
    assert_eq!(back.text, "2");
    // Another session's script sees none of it.
    let other = py(&rt, &id("ana", "s2"), "import os; print(sorted(os.listdir('.')))").await;
    assert_eq!(result(&other)["stdout"], "[]\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_probe() {
    let env = env();
    let rt = runtime(&env, NetworkMode::Full);
    let ana = id("ana", "s1");
    for _ in 0..3 {
        let t = Instant::now();
        let out = py(&rt, &ana, "print(1)").await;
        eprintln!("run took {:?}: {}", t.elapsed(), out.text);
    }
    let _ = Duration::ZERO;
}
