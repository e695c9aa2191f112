//! The container engine harness: Debian's `dockerd` (started here when it is not running; needs
//! root), a `debian:bookworm-slim` made with `debootstrap` + `docker import` when the engine has
//! none (no image registry is reachable), the generated images built from `generated/docker/`
//! with the binary this test run built, and a compose project that is always taken down.
//!
//! Every wait is bounded; a failure prints what the engine said.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Debian's docker CLI (the machine may have a newer one on PATH that talks another API).
pub fn docker() -> Command {
    let bin = if Path::new("/usr/bin/docker").exists() {
        "/usr/bin/docker"
    } else {
        "docker"
    };
    Command::new(bin)
}

/// One test at a time on the engine: a compose deployment coming up beside image builds on two
/// cores can miss its health checks' start period (seen: an instance reported unhealthy).
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static ENGINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    report_failures_inline();
    ENGINE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `cmd`, returning its output; panics with what it printed when it fails.
pub fn run(cmd: &mut Command, what: &str) -> String {
    let out = output(cmd, what);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `cmd` and returns its output whatever the status.
pub fn output(cmd: &mut Command, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The folder this harness keeps its files in (under `target/`).
pub fn work_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
        .join("engine");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Makes sure an engine answers: starts Debian's `dockerd` when none does (waits up to 60 s).
pub fn ensure_engine() {
    if output(docker().arg("info"), "docker info").status.success() {
        return;
    }
    assert!(
        Path::new("/usr/sbin/dockerd").exists(),
        "no container engine: install Debian's docker.io (scripts/test does) and run as root"
    );
    let log = std::fs::File::create(work_dir().join("dockerd.log")).unwrap();
    // Detached: it outlives this test process (the next test binary reuses it).
    #[expect(
        clippy::zombie_processes,
        reason = "dockerd is left running for the next test binary"
    )]
    Command::new("setsid")
        .args(["/usr/sbin/dockerd", "--log-level=warn"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start dockerd");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !output(docker().arg("info"), "docker info").status.success() {
        assert!(
            Instant::now() < deadline,
            "dockerd did not answer within 60 s:\n{}",
            std::fs::read_to_string(work_dir().join("dockerd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Whether the engine has image `name`.
pub fn has_image(name: &str) -> bool {
    output(
        docker().args(["image", "inspect", name]),
        "docker image inspect",
    )
    .status
    .success()
}

/// `debian:bookworm-slim`, made with debootstrap (minbase, from Debian's mirror) and imported when
/// the engine has none.
pub fn ensure_base_image() {
    const BASE: &str = "debian:bookworm-slim";
    if has_image(BASE) {
        return;
    }
    let rootfs = tempfile::tempdir_in(work_dir()).unwrap();
    run(
        Command::new("debootstrap")
            .args(["--variant=minbase", "bookworm"])
            .arg(rootfs.path())
            .arg("http://deb.debian.org/debian"),
        "debootstrap (install Debian's debootstrap; scripts/test does)",
    );
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(rootfs.path())
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status = docker()
        .args(["import", "-", BASE])
        .stdin(tar.stdout.take().unwrap())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    let tarred = tar.wait().unwrap();
    assert!(
        status.success() && tarred.success(),
        "docker import of the debootstrap tree failed (tar {tarred}, import {status})"
    );
}

/// Builds `dockerfile` (relative to the repository root) as `tag` with BuildKit, from `context`.
pub fn build(context: &Path, dockerfile: &Path, tag: &str, args: &[(&str, &str)]) {
    let mut cmd = docker();
    cmd.env("DOCKER_BUILDKIT", "1")
        .args(["build", "--quiet", "--tag", tag, "--file"])
        .arg(dockerfile);
    for (k, v) in args {
        cmd.arg("--build-arg").arg(format!("{k}={v}"));
    }
    cmd.arg(context);
    run(&mut cmd, &format!("docker build {tag}"));
}

/// Builds the server image as `tag` from the binary this test run built (stripped into
/// `target/docker/bulkhead`, the documented prebuilt path), the way CI does.
pub fn build_server_image(tag: &str) {
    build_project_image(&root(), Path::new(env!("CARGO_BIN_EXE_bulkhead")), tag);
}

/// Builds the server image of the project at `project` (its `generated/docker/Dockerfile`) as
/// `tag` from `binary`, stripped into the project's `target/docker/bulkhead`.
pub fn build_project_image(project: &Path, binary: &Path, tag: &str) {
    let staged = project.join("target/docker");
    std::fs::create_dir_all(&staged).unwrap();
    let bin = staged.join("bulkhead");
    run(
        Command::new("strip").arg("-o").arg(&bin).arg(binary),
        "strip",
    );
    let mut args = vec![
        ("BUILD_IMAGE", "debian"),
        ("BUILD_TAG", "bookworm-slim"),
        ("PREBUILT_BINARY", "target/docker/bulkhead"),
    ];
    // This machine's own CAs (a proxy that re-signs TLS), for the image's package downloads.
    let extra = staged.join("extra-ca.crt");
    let mut pem = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/usr/local/share/ca-certificates") {
        let mut files: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "crt"))
        {
            pem.extend(std::fs::read(f).unwrap_or_default());
            pem.push(b'\n');
        }
    }
    if pem.iter().any(|b| !b.is_ascii_whitespace()) {
        std::fs::write(&extra, &pem).unwrap();
        args.push(("EXTRA_CA_CERT", "target/docker/extra-ca.crt"));
    } else {
        let _ = std::fs::remove_file(&extra);
    }
    build(
        project,
        &project.join("generated/docker/Dockerfile"),
        tag,
        &args,
    );
}

/// The test agent image: Debian's python3 with the official MCP Python SDK from PyPI (pip uses
/// this machine's CA bundle). Named after its recipe, so a changed recipe builds anew.
pub fn agent_image() -> String {
    const SDK: &str = "mcp==2.3.0";
    let recipe = format!(
        "ARG BASE_IMAGE=debian:bookworm-slim\nFROM ${{BASE_IMAGE}}\nCOPY ca-certificates.crt /etc/ssl/certs/host-ca.crt\n\
         RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-venv curl ca-certificates >/dev/null \
         && rm -rf /var/lib/apt/lists/* && python3 -m venv /opt/venv \
         && PIP_CERT=/etc/ssl/certs/host-ca.crt /opt/venv/bin/pip install --quiet {SDK}\nENV PATH=/opt/venv/bin:$PATH\n"
    );
    let tag = format!("bulkhead-test-agent:{:016x}", fnv(recipe.as_bytes()));
    if has_image(&tag) {
        return tag;
    }
    let dir = tempfile::tempdir_in(work_dir()).unwrap();
    std::fs::write(dir.path().join("Dockerfile"), &recipe).unwrap();
    let bundle = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("this machine's CA bundle");
    std::fs::copy(bundle, dir.path().join("ca-certificates.crt")).unwrap();
    build(dir.path(), &dir.path().join("Dockerfile"), &tag, &[]);
    tag
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A compose project on the generated file plus a test override; `down -v` on drop.
pub struct Project {
    /// The project name (unique per test process).
    pub name: String,
    files: Vec<PathBuf>,
    env: Vec<(String, String)>,
    dir: PathBuf,
}

impl Project {
    /// A project over `files` (the first sets the project folder), with `env` for interpolation.
    pub fn new(name: &str, files: Vec<PathBuf>, env: Vec<(String, String)>) -> Project {
        let dir = files[0].parent().unwrap().to_path_buf();
        Project {
            name: name.to_string(),
            files,
            env,
            dir,
        }
    }

    /// `docker-compose -p <name> -f … <args>`.
    pub fn compose(&self) -> Command {
        let mut cmd = Command::new("docker-compose");
        cmd.arg("-p").arg(&self.name);
        for f in &self.files {
            cmd.arg("-f").arg(f);
        }
        // Only what the project is given: a variable another test set in this process (a
        // connector's data path, say) must not change what compose mounts.
        cmd.current_dir(&self.dir).env_clear();
        for (k, v) in std::env::vars_os() {
            let keep = k == "PATH" || k == "HOME" || k.to_string_lossy().starts_with("DOCKER_");
            if keep {
                cmd.env(k, v);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }

    /// The container of `service` (the first replica).
    pub fn container(&self, service: &str) -> String {
        let out = run(
            self.compose().args(["ps", "-q", service]),
            "docker-compose ps",
        );
        out.lines().next().unwrap_or_default().trim().to_string()
    }

    /// Every service of the project.
    pub fn services(&self) -> Vec<String> {
        run(
            self.compose().args(["config", "--services"]),
            "docker-compose config",
        )
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// `docker inspect -f <format>` of `service`'s container.
    pub fn inspect(&self, service: &str, format: &str) -> String {
        let id = self.container(service);
        if id.is_empty() {
            return String::new();
        }
        String::from_utf8_lossy(
            &output(
                docker().args(["inspect", "-f", format, &id]),
                "docker inspect",
            )
            .stdout,
        )
        .trim()
        .to_string()
    }

    /// `docker-compose up -d --no-build`; on failure, panics with what compose said, every
    /// container's state and health-check log, and the services' last log lines.
    pub fn up(&self) {
        let out = output(
            self.compose().args(["up", "-d", "--no-build"]),
            "docker-compose up",
        );
        if out.status.success() {
            return;
        }
        let mut states = String::new();
        for s in self.services() {
            states.push_str(&format!(
                "{s}: {}\n",
                self.inspect(
                    &s,
                    "{{.State.Status}} exit={{.State.ExitCode}} restarts={{.RestartCount}} health={{if .State.Health}}{{json .State.Health}}{{end}}"
                )
            ));
        }
        panic!(
            "docker-compose up failed ({}):\n{}{}\n--- containers\n{states}--- logs\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.logs(60)
        );
    }

    /// The last `n` log lines of every service.
    pub fn logs(&self, n: usize) -> String {
        let out = output(
            self.compose()
                .args(["logs", "--no-color", "--tail"])
                .arg(n.to_string()),
            "docker-compose logs",
        );
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Waits (up to `limit`) until every service that has a healthcheck is healthy, every other
    /// one running, and none restarted; panics with the services' states and last log lines.
    pub fn wait_healthy(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let mut pending = Vec::new();
            for s in self.services() {
                let state = self.inspect(
                    &s,
                    "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.RestartCount}}",
                );
                let f: Vec<&str> = state.split_whitespace().collect();
                let restarts = f.get(2).copied().unwrap_or("?");
                assert!(
                    restarts == "0" || restarts == "?",
                    "service {s} restarted ({state}):\n{}",
                    self.logs(40)
                );
                let ok =
                    f.first() == Some(&"running") && matches!(f.get(1), Some(&"healthy" | &"none"));
                if !ok {
                    pending.push(format!("{s}: {state}"));
                }
            }
            if pending.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not healthy within {limit:?}: {pending:?}\n{}",
                self.logs(40)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Runs `cmd` in `service`'s container (`docker exec`).
    pub fn exec(&self, service: &str, cmd: &[&str]) -> Output {
        let id = self.container(service);
        output(docker().arg("exec").arg(&id).args(cmd), "docker exec")
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = output(
            self.compose()
                .args(["down", "-v", "--remove-orphans", "--timeout", "5"]),
            "docker-compose down",
        );
    }
}

/// Prints every test panic of this process on the real stderr as it happens, besides the
/// captured copy libtest shows at the end: a CI log cut to an excerpt then still holds why a
/// long engine test failed, next to its `FAILED` line.
pub fn report_failures_inline() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            use std::io::Write as _;
            let test = std::thread::current().name().unwrap_or("?").to_string();
            let mut said = info.to_string();
            if said.len() > 6000 {
                let mut cut = 6000;
                while !said.is_char_boundary(cut) {
                    cut -= 1;
                }
                said.truncate(cut);
                said.push_str(" …");
            }
            // Not `eprintln!`: libtest captures that; a direct write reaches the log.
            let _ = writeln!(std::io::stderr().lock(), "== {test} failed: {said}");
            default(info);
        }));
    });
}
