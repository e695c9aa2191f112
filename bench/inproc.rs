//! What the in-process benchmarks (`sql_call`, `sandbox`, `upstream`) share: a configuration
//! whose state and workspaces lie in a temporary folder, a 2-worker runtime, and percentiles.

use std::path::Path;
use std::time::Duration;

/// A configuration with one HS256 key, state and workspaces under `dir`, audit synced every 50 ms.
pub fn config(dir: &Path, secret: &str) -> anyhow::Result<bulkhead::config::Config> {
    Ok(bulkhead::config::Config::parse(
        &format!(
            "auth:\n  issuer: b\n  audience: b\n  keys:\n    - {{ kid: k, alg: HS256, secret: {secret} }}\nstate:\n  dir: {d}/state\n  workspaces: {d}/ws\naudit:\n  sync_interval_ms: 50\n",
            d = dir.display()
        ),
        "bench config",
        &|k| std::env::var(k).ok(),
    )?)
}

/// The tokio runtime the servers use (2 workers).
pub fn tokio() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// The `p` quantile of sorted durations, in µs.
#[allow(dead_code)] // not every in-process benchmark reports percentiles
pub fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}
