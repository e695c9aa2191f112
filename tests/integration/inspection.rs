//! Inspection end to end through the official MCP Python SDK on the example's `template` server
//! over real HTTP: both protocol eras, the direct and the rmcp path (see
//! `tests/interop/inspect_client.py`); and through a real upstream MCP server (`upstream.rs`).

use crate::harness::{start, token};
use crate::python_sdk::venv_python;
use bulkhead::policy::NetworkMode;
use std::path::PathBuf;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_reach_the_python_sdk_on_either_era_or_path() {
    let python = tokio::task::spawn_blocking(venv_python).await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let tokens: Vec<String> = (0..9)
        .map(|i| token("ana", &format!("inspect-{i}")))
        .collect();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/inspect_client.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(&inst.url)
        .arg(serde_json::to_string(&tokens).unwrap())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        9,
        "{stdout}"
    );
}
