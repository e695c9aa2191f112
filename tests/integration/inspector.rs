//! The official MCP Inspector (npm `@modelcontextprotocol/inspector`, CLI mode) against a real
//! instance: `tools/list --strict` reports tool-schema portability problems (exit 6 on an error);
//! Bulkhead's generated input and output schemas must pass with no error and no warning. The
//! test installs the Inspector under `target/` with the machine's npm on first run.

use crate::harness::{start, token};
use bulkhead::policy::NetworkMode;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

const VERSION: &str = "2.12.0";

/// The Inspector's CLI entry, installed once per test process.
fn inspector() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"))
            .join("inspector");
        let bin = dir.join("node_modules/.bin/mcp-inspector");
        let installed = std::fs::read_to_string(
            dir.join("node_modules/@modelcontextprotocol/inspector/package.json"),
        )
        .is_ok_and(|p| p.contains(&format!("\"version\": \"{VERSION}\"")));
        if !installed {
            std::fs::create_dir_all(&dir).unwrap();
            let ok = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
                .arg(&dir)
                .arg(format!("@modelcontextprotocol/inspector@{VERSION}"))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "could not install the MCP Inspector with npm (needs Node.js 20+, npm and the npm registry)");
        }
        bin
    })
    .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_strict_lint_finds_nothing_in_the_listed_schemas() {
    let bin = tokio::task::spawn_blocking(inspector).await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(&bin)
            .arg("--cli")
            .arg(&inst.url)
            .args([
                "--header",
                &format!("Authorization: Bearer {}", token("inspector", "s1")),
            ])
            .args(["--method", "tools/list", "--strict"])
            .output(),
    )
    .await
    .expect("the inspector finishes")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "inspector exit {:?}: {stderr}",
        out.status.code()
    );
    assert!(
        !stderr.contains("Warning:") && !stderr.contains("Error:"),
        "strict lint problems:\n{stderr}"
    );
    let listed: Value = serde_json::from_slice(&out.stdout).expect("tools/list as JSON");
    let tools = listed["tools"].as_array().unwrap();
    for name in ["search_records", "load_sensitive_dataset"] {
        let t = tools.iter().find(|t| t["name"] == name).unwrap();
        assert_eq!(t["outputSchema"]["type"], "object", "{name}: {t}");
    }
}
