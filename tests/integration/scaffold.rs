//! The first hour, as a newcomer lives it: `bulkhead new server` in a copy of this project,
//! `cargo build`, then the new server's tool answers over HTTP; `bulkhead dev` restarts the served
//! instance when a spec changes.

use super::harness::SECRET;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A copy of the project's tracked files (as they are in the working tree) in `dest`.
fn copy_project(dest: &Path) {
    let files = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(repo())
        .output()
        .expect("git ls-files");
    assert!(files.status.success());
    for f in files.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let rel = Path::new(std::str::from_utf8(f).unwrap());
        let src = repo().join(rel);
        if !src.is_file() {
            continue;
        }
        let to = dest.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&src, &to).unwrap();
    }
}

fn bulkhead(root: &Path, exe: &Path, args: &[&str]) -> std::process::Output {
    Command::new(exe)
        .args(args)
        .current_dir(root)
        .output()
        .expect("run bulkhead")
}

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(super) fn wait_healthy(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            let _ = s.write_all(
                b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            );
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            if out.starts_with("HTTP/1.1 200") {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// `serve <server>` of the built copy on a free port (with `env`), once healthy, and a client of
/// it as `ana` in `session`.
pub(super) async fn serve(
    exe: &Path,
    root: &Path,
    config: &Path,
    server: &str,
    env: &[(&str, &std::ffi::OsStr)],
    session: &str,
) -> (
    std::process::Child,
    rmcp::service::RunningService<rmcp::RoleClient, ()>,
) {
    let port = free_port();
    let child = Command::new(exe)
        .args(["--config", config.to_str().unwrap(), "serve", server])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .envs(env.iter().copied())
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_healthy(port, Duration::from_secs(60)),
        "`serve {server}` did not start"
    );
    let c = super::harness::client(
        &format!("http://127.0.0.1:{port}/mcp"),
        &super::harness::token("ana", session),
    )
    .await;
    (child, c)
}

/// `bulkhead new server support` in a copy of this project, a real `cargo build` of that copy
/// (its own target folder, kept between runs), and a call to the new `hello` tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_builds_and_its_tool_answers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    copy_project(&root);
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_bulkhead"));
    let out = bulkhead(&root, &exe, &["new", "server", "support"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bulkhead(&root, &exe, &["new", "tool", "support", "lookup"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The shipped template (resources and prompts after its tools, a handler module that imports
    // only what it uses): a handler tool and a tool over a confidential operation both scaffold,
    // and the build below compiles the result.
    for args in [
        &["new", "tool", "template", "lookup_owner"][..],
        &[
            "new",
            "tool",
            "template",
            "find_record",
            "--uses",
            "records.get",
        ][..],
    ] {
        let out = bulkhead(&root, &exe, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A real third-party server, imported the way its README says to start it, each tool then
    // decided by a person (here: all read, public), built with the rest.
    let out = bulkhead(
        &root,
        &exe,
        &[
            "import",
            "mcp",
            "--name",
            "reference",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything@2026.8.31",
        ],
    );
    assert!(
        out.status.success(),
        "import by npx: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lock = std::fs::read_to_string(root.join("specs/connectors/reference.lock.json")).unwrap();
    assert!(
        lock.contains(r#""package": "npm:@modelcontextprotocol/server-everything@2026.8.31""#),
        "{lock}"
    );
    let installed =
        root.join(".bulkhead/upstreams/reference/node_modules/.bin/mcp-server-everything");
    assert!(installed.exists(), "installed into the project's cache");
    let server = root.join("specs/servers/reference.yaml");
    let decided = std::fs::read_to_string(&server).unwrap().replace(
        "    context: default\n",
        "    context: default\n    permission: read\n    sensitivity: public\n",
    );
    std::fs::write(&server, decided).unwrap();
    // An OpenAPI document and a Toolbox file, imported, each proposal confirmed as written.
    super::import::import_and_decide(&root, &exe);
    // A target folder of its own: the copy's build script output must not clobber ours.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("scaffold-check");
    let built = Command::new(env!("CARGO"))
        .args(["build", "--bin", "bulkhead", "--quiet"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&root)
        .output()
        .expect("cargo build");
    assert!(
        built.status.success(),
        "the scaffolded project does not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let new_exe = target.join("debug/bulkhead");
    let tools = bulkhead(&root, &new_exe, &["tools", "support"]);
    let listing = String::from_utf8_lossy(&tools.stdout);
    assert!(
        listing.contains("hello") && listing.contains("lookup"),
        "{listing}"
    );
    let config = root.join("test-config.yaml");
    std::fs::write(
        &config,
        format!("auth:\n  issuer: test-issuer\n  audience: bulkhead-test\n  keys:\n    - {{ kid: dev, alg: HS256, secret: {SECRET} }}\n"),
    )
    .unwrap();
    let (mut child, c) = serve(&new_exe, &root, &config, "support", &[], "s1").await;
    let (err, text, _) =
        super::harness::call(&c, "hello", serde_json::json!({"text": "world"})).await;
    assert!(!err && text == "hello: world", "{text}");
    let (err, text, _) =
        super::harness::call(&c, "lookup", serde_json::json!({"text": "T-1"})).await;
    assert!(!err && text == "lookup: T-1", "{text}");
    let _ = child.kill();
    let _ = child.wait();
    // The imported server, its upstream started from the project's cache: `message_type` in the
    // spec reaches the upstream as `messageType`.
    let (mut child, c) = serve(
        &new_exe,
        &root,
        &config,
        "reference",
        &[("MCP_REFERENCE", installed.as_os_str())],
        "s2",
    )
    .await;
    let (err, text, _) = super::harness::call(
        &c,
        "get_annotated_message",
        serde_json::json!({"message_type": "error", "include_image": false}),
    )
    .await;
    assert!(!err, "{text}");
    assert!(
        text.contains("Error"),
        "the upstream read `messageType`: {text}"
    );
    let _ = child.kill();
    let _ = child.wait();
    super::import::imported_tools_answer(&root, &new_exe, &config).await;
}

/// `bulkhead dev` serves, notices a spec change, runs the build command and restarts.
#[test]
fn dev_restarts_the_instance_when_a_spec_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("specs/servers")).unwrap();
    std::fs::copy(
        repo().join("specs/servers/template.yaml"),
        root.join("specs/servers/template.yaml"),
    )
    .unwrap();
    let port = free_port();
    let mut dev = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["dev", "template", "--root", root.to_str().unwrap()])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--build",
            "true",
            "--max-rebuilds",
            "2",
        ])
        .args(["--exe", env!("CARGO_BIN_EXE_bulkhead")])
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_healthy(port, Duration::from_secs(30)),
        "dev did not serve"
    );
    std::thread::sleep(Duration::from_millis(300));
    let spec = root.join("specs/servers/template.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}\n# touched\n")).unwrap();
    // Drain dev's stderr for its whole life (the served child writes there too).
    let stderr = BufReader::new(dev.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("no restart within 30 s");
        if line.contains("restarted `template`") {
            break;
        }
    }
    assert!(
        wait_healthy(port, Duration::from_secs(30)),
        "not serving after the restart"
    );
    // A second change ends the run (--max-rebuilds 2).
    std::fs::write(&spec, format!("{text}\n# touched twice\n")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while dev.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "dev did not stop after --max-rebuilds 2"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
