//! `bulkhead up`: the deployment's instances locally, isolated by network namespaces, until Ctrl-C;
//! with `--unisolated`, the same instances as plain processes on 127.0.0.1 (development without
//! root: every tool answers from the instance its data needs, but nothing isolates the network).

use bulkhead::isolation::up::{UpOptions, namespaces_permitted, up};
use bulkhead::project::Project;
use std::path::PathBuf;
use std::process::ExitCode;

/// Brings the deployment up, prints how to reach it, waits for Ctrl-C, tears down.
pub fn run(
    project: &'static Project,
    config: Option<PathBuf>,
    deployment: &str,
) -> anyhow::Result<ExitCode> {
    let dep = project
        .deployment(deployment)
        .ok_or_else(|| anyhow::anyhow!("no deployment `{deployment}` in specs/deployments/"))?;
    namespaces_permitted()?;
    let config = config.or_else(local_config);
    let env = super::samples::seed(std::path::Path::new(".bulkhead/samples"))?;
    let jail_egress = bulkhead::isolation::up::jail_egress_of(project, dep, &|k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(k).ok())
    });
    let opts = UpOptions {
        exe: std::env::current_exe()?,
        config,
        subnet: bulkhead_lang::emit::deploy::local::DEFAULT_SUBNET,
        prefix: "bh".into(),
        proxied_egress: None,
        env,
        jail_egress,
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
    wait_for_stop()?;
    drop(running);
    println!("stopped; namespaces removed");
    Ok(ExitCode::SUCCESS)
}

/// Every instance of `deployment` as a child process on 127.0.0.1 (`serve --unisolated`), on the
/// ports compose publishes (the server's port, then one per more isolated mode), until Ctrl-C.
pub fn run_unisolated(
    project: &'static Project,
    config: Option<PathBuf>,
    deployment: &str,
    first_port: Option<u16>,
) -> anyhow::Result<ExitCode> {
    use std::process::{Command, Stdio};
    let dep = project
        .deployment(deployment)
        .ok_or_else(|| anyhow::anyhow!("no deployment `{deployment}` in specs/deployments/"))?;
    let config = config.or_else(local_config);
    let env = super::samples::seed(std::path::Path::new(".bulkhead/samples"))?;
    let exe = std::env::current_exe()?;
    let shift = first_port.map_or(0i32, |p| {
        i32::from(p) - i32::from(dep.servers.first().map_or(p, |s| s.port))
    });
    struct Running {
        server: &'static str,
        mode: bulkhead::policy::NetworkMode,
        port: u16,
        url: String,
        child: std::process::Child,
    }
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
    let mut running = Vec::new();
    for s in dep.servers {
        for (i, mode) in s.modes().into_iter().enumerate() {
            let port = u16::try_from(i32::from(s.port) + shift + i as i32).map_err(|_| {
                anyhow::anyhow!("--port {first_port:?} puts `{}` off the port range", s.name)
            })?;
            let mut cmd = Command::new(&exe);
            if let Some(c) = &config {
                cmd.arg("--config").arg(c);
            }
            cmd.args([
                "serve",
                s.name,
                "--mode",
                mode.as_str(),
                "--unisolated",
                "--listen",
            ])
            .arg(format!("127.0.0.1:{port}"))
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null());
            // The instances end with this process, however it ends (a kill -9 included).
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(|| {
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                        .map_err(std::io::Error::from)
                });
            }
            let child = cmd.spawn()?;
            running.push(Running {
                server: s.name,
                mode,
                port,
                url: format!("http://127.0.0.1:{port}/mcp"),
                child,
            });
        }
    }
    // Ready when each answers /healthz (bounded: a child that exits or never answers fails it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for r in &mut running {
        loop {
            if let Some(status) = r.child.try_wait()? {
                anyhow::bail!("`{}` ({}) exited at start: {status}", r.server, r.mode);
            }
            if healthy(r.port) {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "`{}` ({}) did not answer on 127.0.0.1:{} within 60 s",
                r.server,
                r.mode,
                r.port
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    println!("deployment `{deployment}` is up WITHOUT network isolation (development):");
    for r in &running {
        println!("  {:<12} {:<8} {}", r.server, r.mode.as_str(), r.url);
    }
    println!(
        "\nclient entries for config.yaml (the isolating client follows the session's level):\n{}",
        bulkhead::isolation::up::client_entries(running.iter().map(|r| (
            r.server,
            r.mode,
            r.url.as_str()
        )))
    );
    println!(
        "\nget a token with `bulkhead token`. Confidential tools answer on the proxied instance, secret ones on the isolated one. `notify_team` posts to WEBHOOK_URL (a placeholder host unless you set it). Ctrl-C stops everything."
    );
    wait_for_stop()?;
    drop(running);
    println!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Whether 127.0.0.1:`port` answers `GET /healthz` with 200.
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

/// `config.yaml` in the working folder, when there is one.
fn local_config() -> Option<PathBuf> {
    let p = std::path::Path::new("config.yaml");
    p.exists().then(|| p.to_path_buf())
}

/// Waits for Ctrl-C or SIGTERM.
fn wait_for_stop() -> anyhow::Result<()> {
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
    Ok(())
}
