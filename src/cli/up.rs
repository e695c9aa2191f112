//! `bulkhead up`: the deployment's instances locally, isolated by network namespaces, until Ctrl-C.

use bulkhead::isolation::up::{UpOptions, namespaces_permitted, up};
use std::path::PathBuf;
use std::process::ExitCode;

/// Brings the deployment up, prints how to reach it, waits for Ctrl-C, tears down.
pub fn run(config: Option<PathBuf>, deployment: &str) -> anyhow::Result<ExitCode> {
    let dep = bulkhead::servers::DEPLOYMENTS
        .iter()
        .find(|d| d.name == deployment)
        .ok_or_else(|| anyhow::anyhow!("no deployment `{deployment}` in specs/deployments/"))?;
    namespaces_permitted()?;
    let config = config.or_else(|| {
        std::path::Path::new("config.yaml")
            .exists()
            .then(|| PathBuf::from("config.yaml"))
    });
    let env = super::samples::seed(std::path::Path::new(".bulkhead/samples"))?;
    let opts = UpOptions {
        exe: std::env::current_exe()?,
        config,
        subnet: bulkhead_codegen::emit::deploy::local::DEFAULT_SUBNET,
        prefix: "bh".into(),
        proxied_egress: None,
        env,
    };
    let running = up(dep, &opts)?;
    println!("deployment `{deployment}` is up:");
    for i in &running.instances {
        println!("  {:<12} {:<8} {}", i.server, i.mode.as_str(), i.url);
    }
    println!(
        "\nclient entries for config.yaml:\n{}",
        running.client_entries()
    );
    let mut servers: Vec<&str> = running
        .instances
        .iter()
        .map(|i| i.server.as_str())
        .collect();
    servers.dedup();
    println!("desktop clients (Claude Desktop, VS Code, Cursor) start, with BULKHEAD_TOKEN set:");
    for s in servers {
        println!("  bulkhead {}", running.connect_args(s).join(" "));
    }
    println!(
        "\nget a token with `bulkhead token`; Ctrl-C stops everything and removes the namespaces."
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    })?;
    drop(running);
    println!("stopped; namespaces removed");
    Ok(ExitCode::SUCCESS)
}
