//! Interoperability with the official MCP Python SDK (`mcp` from PyPI) over Streamable HTTP.
//! The test makes its own virtualenv under `target/` on first run (pip from PyPI), then reuses it.

use crate::harness::{start, token};
use bulkhead::policy::NetworkMode;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

#[path = "../support/venv.rs"]
mod venv;
pub use venv::venv_python;

/// Runs `tests/interop/<script> URL TOKEN` with the SDK's Python; fails unless it exits 0.
pub async fn run_client(script: &str, url: &str, token: &str) -> std::process::Output {
    let python = tokio::task::spawn_blocking(venv_python).await.unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script);
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(url)
        .arg(token)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "python client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_lists_and_calls_tools() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let out = run_client("python_client.py", &inst.url, &token("pat", "py-1")).await;
    // The SDK's session ends cleanly: DELETE is answered 204, which it accepts (202 made it log
    // "Session termination failed: 202").
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).expect("client prints JSON");
    assert_eq!(seen["server"], "bulkhead-template");
    assert_eq!(seen["tools"].as_array().unwrap().len(), 9);
    assert_eq!(seen["write_error"], false);
    assert_eq!(seen["read_text"], "from python");
    assert_eq!(seen["read_meta"]["bulkhead/sensitivity"], "internal");
    assert_eq!(seen["bad_error"], true);
    assert!(
        seen["bad_text"]
            .as_str()
            .unwrap()
            .contains("`path` is required"),
        "{seen}"
    );
}

/// Resources and prompts through the official Python SDK: listed, read through the wrapper
/// (a confidential resource is refused by the full instance and served by the proxied one, and
/// reading it raises the session), prompts rendered with their arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_reads_resources_and_prompts() {
    let python = tokio::task::spawn_blocking(venv_python).await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let full = start(dir.clone(), NetworkMode::Full, true).await;
    let proxied = start(dir, NetworkMode::Proxied, true).await;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/resources_client.py");
    let run = |url: String, session: &'static str| {
        let (python, script) = (python.clone(), script.clone());
        async move {
            let out = tokio::process::Command::new(python)
                .arg(script)
                .arg(url)
                .arg(token("pat", session))
                .output()
                .await
                .unwrap();
            assert!(
                out.status.success(),
                "python client failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<Value>(&out.stdout).expect("client prints JSON")
        }
    };
    let seen = run(full.url.clone(), "res-full").await;
    assert_eq!(seen["has_resources"], true);
    assert_eq!(seen["has_prompts"], true);
    assert_eq!(
        seen["resources"],
        serde_json::json!(["docs://template/guide"])
    );
    assert_eq!(seen["templates"], serde_json::json!(["records://{id}"]));
    assert_eq!(seen["prompts"], serde_json::json!(["find_customer"]));
    assert!(
        seen["guide"]["text"]
            .as_str()
            .unwrap()
            .contains("# Template server"),
        "{seen}"
    );
    assert_eq!(seen["guide"]["meta"]["bulkhead/sensitivity"], "public");
    let refused = seen["record"]["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("proxied"),
        "the full instance served a confidential resource: {seen}"
    );
    assert!(
        seen["prompt_text"].as_str().unwrap().contains("\"Acme\""),
        "{seen}"
    );
    let seen = run(proxied.url.clone(), "res-proxied").await;
    assert!(
        seen["record"]["text"]
            .as_str()
            .unwrap()
            .contains("Acme renewal #100"),
        "{seen}"
    );
    assert_eq!(
        seen["record"]["meta"]["bulkhead/sensitivity"],
        "confidential"
    );
    assert!(
        seen["missing"]["text"]
            .as_str()
            .unwrap()
            .starts_with("No rows matched"),
        "{seen}"
    );
    // Declared results, validated by the SDK against the listed outputSchema.
    assert_eq!(seen["rows"]["error"], false, "{seen}");
    let rows = &seen["rows"]["structured"];
    assert_eq!(rows["rows"].as_array().map(Vec::len), Some(2), "{seen}");
    assert!(
        rows["rows"][0]["title"].as_str().unwrap().contains("Acme"),
        "{seen}"
    );
    assert_eq!(seen["dataset"]["error"], false, "{seen}");
    assert_eq!(seen["dataset"]["structured"]["dataset"], "py", "{seen}");
}
