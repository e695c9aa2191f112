//! `bulkhead dev`: watches `specs/` (and the handler modules), rebuilds, and restarts the served
//! instance after each change; a build that fails leaves the running instance alone and shows
//! the build's diagnostics.

use notify::{RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How to run the loop.
pub struct DevArgs {
    /// The project folder.
    pub root: PathBuf,
    /// Server to serve.
    pub server: String,
    /// `serve` arguments after the server name (listen address, mode…).
    pub serve_args: Vec<String>,
    /// The build command (default `cargo build`).
    pub build: Vec<String>,
    /// The binary to serve with after a build (default `target/debug/bulkhead` in the project).
    pub exe: PathBuf,
    /// Stop after this many rebuilds (for tests; unlimited when `None`).
    pub max_rebuilds: Option<usize>,
}

/// Quiet period before a burst of changes triggers one rebuild.
const SETTLE: Duration = Duration::from_millis(300);

fn serve(args: &DevArgs) -> std::io::Result<Child> {
    let mut cmd = Command::new(&args.exe);
    cmd.arg("serve").arg(&args.server).args(&args.serve_args);
    cmd.current_dir(&args.root).stdin(Stdio::null());
    cmd.spawn()
}

fn build(args: &DevArgs) -> bool {
    let Some((prog, rest)) = args.build.split_first() else {
        return true;
    };
    eprintln!("bulkhead dev: building ({})", args.build.join(" "));
    Command::new(prog)
        .args(rest)
        .current_dir(&args.root)
        .status()
        .is_ok_and(|s| s.success())
}

fn stop(child: &mut Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Serves, then rebuilds and restarts on every settled change under `specs/` or `src/handlers/`.
pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if let Ok(ev) = ev
            && !matches!(ev.kind, notify::EventKind::Access(_))
        {
            let _ = tx.send(ev.paths);
        }
    })?;
    let watched: Vec<PathBuf> = [
        "specs/servers",
        "specs/connectors",
        "specs/deployments",
        "src/handlers",
    ]
    .iter()
    .map(|d| args.root.join(d))
    .filter(|d| d.is_dir())
    .collect();
    for d in &watched {
        watcher.watch(d, RecursiveMode::Recursive)?;
    }
    eprintln!(
        "bulkhead dev: watching {} (Ctrl-C stops)",
        watched
            .iter()
            .map(|d| rel(&args.root, d))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut child = serve(&args)?;
    let mut rebuilds = 0;
    while let Ok(first) = rx.recv() {
        let mut changed: Vec<PathBuf> = first;
        // Let a burst of writes (an editor's save, a git checkout) settle into one rebuild.
        while let Ok(more) = rx.recv_timeout(SETTLE) {
            changed.extend(more);
        }
        changed.sort();
        changed.dedup();
        eprintln!(
            "bulkhead dev: changed {}",
            changed
                .iter()
                .map(|p| rel(&args.root, p))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if build(&args) {
            stop(&mut child);
            child = serve(&args)?;
            eprintln!("bulkhead dev: restarted `{}`", args.server);
        } else {
            eprintln!("bulkhead dev: build failed; the running instance is unchanged");
        }
        rebuilds += 1;
        if args.max_rebuilds.is_some_and(|m| rebuilds >= m) {
            break;
        }
    }
    stop(&mut child);
    Ok(ExitCode::SUCCESS)
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}
