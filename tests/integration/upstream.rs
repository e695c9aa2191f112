//! MCP servers nobody here wrote, as `mcp` connectors: the real `mcp-server-time` from PyPI
//! (pinned version) behind the generated `third_party` server over real HTTP, and a deliberately
//! misbehaving upstream (`tests/fixtures/upstream/misbehaving.py`) for drift, crashes, hangs,
//! garbage, huge messages, 10,000 tools and requests the policy does not allow.

use super::procs::{Deployment, Store, call, client, notify};
use bulkhead::codegen::OperationBody;
use bulkhead::connectors::{self, Connectors};
use bulkhead::policy::NetworkMode;
use bulkhead::signals::CallSignals;
use bulkhead::tooldef::{ConnectorDef, OperationDef};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// `mcp-server-time` at its pinned version, in a virtualenv under `target/` (pip, PyPI).
pub fn mcp_server_time() -> PathBuf {
    super::harness::pip_venv("upstreams/venv", &["mcp-server-time==2026.10.19"])
        .join("bin/mcp-server-time")
}

/// `mcp-server-fetch` at its pinned version, in a virtualenv of its own under `target/`.
pub fn mcp_server_fetch() -> PathBuf {
    super::harness::pip_venv("upstreams/fetch-venv", &["mcp-server-fetch==2026.10.24"])
        .join("bin/mcp-server-fetch")
}

/// A stand-in for a proxied instance's egress proxy on loopback: answers every request with a
/// small text page and keeps each request line it was sent.
struct FakeProxy {
    url: String,
    lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl FakeProxy {
    async fn start() -> FakeProxy {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = lines.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16384];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&got);
                    kept.lock()
                        .unwrap()
                        .push(text.lines().next().unwrap_or("").to_string());
                    // Plain text: `mcp-server-fetch` simplifies HTML with readabilipy, which runs
                    // `npm install` on first use when Node.js is present (no registry in a jail).
                    let body = "Runbook\n\nRestart the queue worker first.\n";
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        FakeProxy { url, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// A token of the procs deployments' key with `scope`.
fn scoped_token(user: &str, session: &str, scope: &str) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"sub": user, "session_id": session, "iss": "test-issuer",
                        "aud": "bulkhead-test", "iat": now, "exp": now + 300, "scope": scope});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("dev".into());
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(super::procs::SECRET.as_bytes()),
    )
    .unwrap()
}

/// The example `connect` upstream end to end: the real `mcp-server-fetch` behind
/// `third_party.fetch_page` (connector `fetch`, `egress: [docs.example.com:80]` here) on a proxied
/// instance that requires the scope `mcp:connect` for connect tools. Without that scope the tool
/// is refused before the upstream sees the call; with it, its request leaves its jail only through
/// the server's gate and then the instance's egress proxy, as sent; a host it does not declare
/// never reaches the proxy; once the session holds confidential data the tool is refused again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_networked_upstream_reaches_its_declared_host_only_while_the_session_may() {
    let bin = tokio::task::spawn_blocking(mcp_server_fetch).await.unwrap();
    let time = tokio::task::spawn_blocking(mcp_server_time).await.unwrap();
    let proxy = FakeProxy::start().await;
    let mut dep = Deployment::new(Store::Sqlite, "fetch").await;
    dep.set_env("MCP_SERVER_FETCH", bin.to_str().unwrap());
    dep.set_env("MCP_SERVER_TIME", time.to_str().unwrap());
    dep.set_env("FETCH_EGRESS", "docs.example.com:80");
    dep.set_env("HTTPS_PROXY", &proxy.url);
    dep.set_env("HTTP_PROXY", &proxy.url);
    let config = std::fs::read_to_string(&dep.config).unwrap();
    std::fs::write(
        &dep.config,
        config.replacen("  keys:", "  scopes:\n    connect: mcp:connect\n  keys:", 1),
    )
    .unwrap();
    let proxied = dep
        .try_start_server("third_party", "proxied", None)
        .unwrap();
    let unscoped =
        super::harness::client(&proxied.url, &scoped_token("ana", "fetch1", "openid")).await;
    let r = call(
        &unscoped,
        "fetch_page",
        json!({"url": "http://docs.example.com/runbook"}),
    )
    .await
    .unwrap();
    assert!(r.is_error && r.text.contains("`mcp:connect`"), "{}", r.text);
    assert!(proxy.lines().is_empty(), "{:?}", proxy.lines());
    let _ = unscoped.cancel().await;
    let c = super::harness::client(
        &proxied.url,
        &scoped_token("ana", "fetch1", "openid mcp:connect"),
    )
    .await;
    let r = call(
        &c,
        "fetch_page",
        json!({"url": "http://docs.example.com/runbook"}),
    )
    .await
    .unwrap();
    assert!(
        !r.is_error && r.text.contains("Restart the queue worker"),
        "{}",
        r.text
    );
    let lines = proxy.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("GET http://docs.example.com/runbook ")),
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|l| l.contains("http://docs.example.com/")),
        "{lines:?}"
    );
    // A host it does not declare: refused by the gate, never handed to the proxy.
    let before = proxy.lines().len();
    let r = call(
        &c,
        "fetch_page",
        json!({"url": "http://collector.example.net/upload"}),
    )
    .await
    .unwrap();
    assert!(r.is_error, "{}", r.text);
    assert_eq!(proxy.lines().len(), before, "{:?}", proxy.lines());
    // Confidential data in the session: the connect tool is refused; nothing reaches the proxy.
    let r = call(
        &c,
        "convert_meeting_time",
        json!({"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}),
    )
    .await
    .unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(r.level, "confidential");
    let r = call(
        &c,
        "fetch_page",
        json!({"url": "http://docs.example.com/runbook?q=18:30"}),
    )
    .await
    .unwrap();
    assert!(r.is_error && r.text.starts_with("[FATAL]"), "{}", r.text);
    assert_eq!(proxy.lines().len(), before, "{:?}", proxy.lines());
    let _ = c.cancel().await;
}

/// Debian's Python (a version manager's shim on `PATH` is a script that would need its own
/// folders in the jail).
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/misbehaving.py")
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

/// An operation body as generated code carries it (JSON), for a definition made at run time.
fn body(b: OperationBody) -> &'static str {
    Box::leak(serde_json::to_string(&b).expect("JSON").into_boxed_str())
}

fn s(v: String) -> &'static str {
    Box::leak(v.into_boxed_str())
}

/// The pin and definition of the fixture's `echo` as it first lists it.
fn echo_pin() -> (String, String) {
    let tool: rmcp::model::Tool = serde_json::from_value(json!({
        "name": "echo",
        "description": "Echo the message back.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    }))
    .unwrap();
    let d = bulkhead::connectors::mcp::pin::definition(&tool);
    (bulkhead::connectors::mcp::pin::pin_of(&d), d.to_string())
}

/// An `mcp` connector over the fixture in `mode` declaring `echo` (and `other`, unpinned
/// unless `pin_other`), with the given extra settings.
fn misbehaving(mode: &str, state: &Path, extra: Value) -> Connectors {
    misbehaving_with(mode, state, extra, &|_| None)
}

/// [`misbehaving`] with its connector settings' variables read by `lookup`.
fn misbehaving_with(
    mode: &str,
    state: &Path,
    extra: Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Connectors {
    let def: &'static ConnectorDef = leak(fixture_def(mode, state, extra));
    Connectors::new([def], lookup).unwrap()
}

/// The `mcp` connector `fixture` over the fixture in `mode`, declaring `echo`.
fn fixture_def(mode: &str, state: &Path, extra: Value) -> ConnectorDef {
    let (pin, definition) = echo_pin();
    let mut settings = json!({
        "command": [python(), fixture().to_str().unwrap(), mode, state.to_str().unwrap()],
        "start_timeout_ms": 10000,
        "call_timeout_ms": 3000,
        // The jail shows the fixture (read-only) and its state folder, nothing else of the host.
        "read_only": [fixture().parent().unwrap().to_str().unwrap()],
        "read_write": [state.to_str().unwrap()],
    });
    for (k, v) in extra.as_object().unwrap() {
        settings[k] = v.clone();
    }
    let ops = vec![OperationDef {
        name: "echo",
        params_schema: r#"{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}"#,
        body: body(OperationBody::Mcp {
            tool: "echo".into(),
            pin,
            definition,
            server: "misbehaving@1.0.0".into(),
            remote: false,
            renames: Vec::new(),
        }),
    }];
    ConnectorDef {
        secrets: &[],
        name: "fixture",
        kind: bulkhead_vocab::connector::ConnectorKind::Mcp,
        sensitivity: bulkhead::policy::Sensitivity::Public,
        settings: s(settings.to_string()),
        operations: Box::leak(ops.into_boxed_slice()),
    }
}

async fn echo(
    c: &Connectors,
    ws: &std::sync::Arc<bulkhead::workspace::SessionWorkspace>,
    msg: &str,
) -> Result<String, bulkhead::errors::ToolError> {
    echo_in(c, ws, msg, NetworkMode::None).await
}

/// `echo` from a call on an instance in `mode`.
async fn echo_in(
    c: &Connectors,
    ws: &std::sync::Arc<bulkhead::workspace::SessionWorkspace>,
    msg: &str,
    mode: NetworkMode,
) -> Result<String, bulkhead::errors::ToolError> {
    call_in_mode(c, "fixture", ws, "echo", json!({"message": msg}), mode).await
}

/// Calls `connector.tool` from a call on a `full` instance.
async fn call_on(
    c: &Connectors,
    connector: &str,
    ws: &std::sync::Arc<bulkhead::workspace::SessionWorkspace>,
    tool: &str,
    args: Value,
) -> Result<String, bulkhead::errors::ToolError> {
    call_in_mode(c, connector, ws, tool, args, NetworkMode::Full).await
}

/// Calls `connector.tool` from a call on an instance in `mode`; its text.
async fn call_in_mode(
    c: &Connectors,
    connector: &str,
    ws: &std::sync::Arc<bulkhead::workspace::SessionWorkspace>,
    tool: &str,
    args: Value,
    mode: NetworkMode,
) -> Result<String, bulkhead::errors::ToolError> {
    let jail = connectors::sandbox::JailContext::outside_a_call(mode);
    let args = args.as_object().cloned().unwrap();
    match connectors::call_in(c, connector, tool, ws, args, &jail, &CallSignals::new()).await? {
        bulkhead::server::ToolOutput::Text(t) => Ok(t),
        other => panic!("{other:?}"),
    }
}

/// Whether this host lets a jail mount a `/proc` of its own (a container engine masks its own,
/// and the kernel then refuses a new one).
fn host_mounts_a_proc() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-user", "--unshare-pid", "--ro-bind", "/", "/"])
        .args(["--proc", "/proc", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn workspace(dir: &Path) -> std::sync::Arc<bulkhead::workspace::SessionWorkspace> {
    let root = bulkhead::workspace::WorkspaceRoot::new(dir.join("ws")).unwrap();
    std::sync::Arc::new(
        root.session(&bulkhead::identity::Identity::new("u", "s").unwrap())
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rug_pull_refuses_the_drifted_tool_naming_the_drift() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("drift", dir.path(), json!({}));
    assert_eq!(echo(&c, &ws, "first").await.unwrap(), "echo: first");
    // The upstream changed `echo`'s description and said so: refused, the drift named.
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match echo(&c, &ws, "second").await {
            Err(e) => break e,
            Ok(_) => {
                assert!(Instant::now() < deadline, "the drift was never noticed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert!(refused.is_fatal(), "{refused:?}");
    let text = refused.wire_text();
    assert!(
        text.starts_with("[FATAL]") && text.contains("drifted") && text.contains("description"),
        "{text}"
    );
    // Readiness reports it too.
    let probe = c.probe().await;
    assert!(
        probe
            .iter()
            .any(|(n, r)| *n == "fixture" && r.as_ref().is_err_and(|e| e.contains("drifted"))),
        "{probe:?}"
    );
}

/// Under protocol 2026-07-28 an upstream that takes no subscription cannot tell of a changed
/// list; with `pin_max_age_ms: 0` its list is read beside every call and the answer is given
/// only if it still matches the pin: a definition changed without a word is refused, at the
/// latest at the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_rug_pull_under_2026_07_28_is_refused_at_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("modern", dir.path(), json!({"pin_max_age_ms": 0}));
    assert_eq!(echo(&c, &ws, "first").await.unwrap(), "echo: first");
    // The upstream changes `echo` while answering this call: the list read beside it may show
    // the change already (then this answer is withheld) or not yet.
    if let Err(e) = echo(&c, &ws, "change").await {
        assert!(e.is_fatal() && e.wire_text().contains("drifted"), "{e:?}");
    }
    let refused = echo(&c, &ws, "third").await.unwrap_err();
    assert!(refused.is_fatal(), "{refused:?}");
    let text = refused.wire_text();
    assert!(
        text.contains("drifted") && text.contains("description"),
        "{text}"
    );
}

/// With the default `pin_max_age_ms` (100) a list read vouches for the calls sent within 100 ms
/// after it: a silent change is refused at every call sent 100 ms or more after it (here: the
/// next call once that long has passed), and an answer is never released on a list read older
/// than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_rug_pull_is_refused_once_the_last_list_read_is_older_than_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("modern", dir.path(), json!({"pin_max_age_ms": 100}));
    assert_eq!(echo(&c, &ws, "first").await.unwrap(), "echo: first");
    // The upstream changes `echo` while answering this call (vouched for or not).
    if let Err(e) = echo(&c, &ws, "change").await {
        assert!(e.is_fatal() && e.wire_text().contains("drifted"), "{e:?}");
    }
    let changed = Instant::now();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Sent 100 ms or more after the change: the list is read beside it, and it is refused.
    let refused = echo(&c, &ws, "late").await.unwrap_err();
    assert!(changed.elapsed() >= Duration::from_millis(100));
    assert!(refused.is_fatal(), "{refused:?}");
    assert!(refused.wire_text().contains("drifted"), "{refused:?}");
    // And refused from then on.
    assert!(echo(&c, &ws, "later").await.unwrap_err().is_fatal());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_crashes_mid_call_gets_a_retryable_error_and_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("crash", dir.path(), json!({}));
    let e = echo(&c, &ws, "boom").await.unwrap_err();
    assert!(!e.is_fatal(), "{e:?}");
    // Started again on a later call (after the backoff), and crashing again: bounded, no hang.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let _ = echo(&c, &ws, "again").await;
        let starts = std::fs::read_to_string(dir.path().join("starts")).unwrap_or_default();
        if starts.lines().count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "never restarted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A hostile upstream (it does what the model asks of it) in its jail, declared with no
/// `egress`: none of the server's files exist for it (state store, configuration, other
/// sessions' workspaces, the host's secrets), it has no `/proc` (so no mount table naming the
/// host paths of its folders) and, given one (`proc: true`), none of the server's environment
/// is readable from any process it can see; on every mode nothing it sends leaves its own
/// loopback: not a host 127.0.0.1 listener, not a host abstract Unix socket, even though this
/// test instance runs unisolated on the host's network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_upstream_sees_no_server_file_and_no_network_on_any_mode() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    let ws = workspace(dir.path());
    // What a hostile server goes for: the compliance record it could lower, the server's
    // configuration, another session's files.
    let store = dir.path().join("compliance.db");
    std::fs::write(&store, "the ratchet").unwrap();
    let other = dir.path().join("ws/other-user");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "ben's secret").unwrap();
    let listener = super::sandbox::Listener::start().await;
    let abstract_socket = super::sandbox::AbstractListener::start();
    for mode in [NetworkMode::None, NetworkMode::Proxied, NetworkMode::Full] {
        // One connector per instance, as on a deployment.
        let c = misbehaving("snoop", &state, json!({}));
        for order in [
            format!("connect 127.0.0.1 {}", listener.port),
            format!("connect ::1 {}", listener.port),
            format!("abstract {}", abstract_socket.name),
            format!("fetch http://127.0.0.1:{}/", listener.port),
        ] {
            let said = echo_in(&c, &ws, &order, mode).await.unwrap();
            assert!(said.starts_with("refused"), "{mode:?} {order}: {said}");
        }
        let said = echo_in(&c, &ws, "environ", mode).await.unwrap();
        assert_eq!(said, "environ: no /proc", "{mode:?}");
        let said = echo_in(&c, &ws, "show /proc/self/mountinfo", mode)
            .await
            .unwrap();
        assert!(said.starts_with("refused"), "{mode:?}: {said}");
        // With `proc: true` it sees its own jail's processes (where the host lets a jail
        // mount one), and nothing of the server's.
        let with_proc = misbehaving("snoop", &state, json!({"proc": true}));
        let said = echo_in(&with_proc, &ws, "environ", mode).await.unwrap();
        let shown = echo_in(&with_proc, &ws, "show /proc/self/mountinfo", mode)
            .await
            .unwrap();
        if host_mounts_a_proc() {
            assert!(
                said.starts_with("environ ") && said.contains(": "),
                "{said}"
            );
            assert!(shown.starts_with("shown "), "{mode:?}: {shown}");
        } else {
            assert_eq!(said, "environ: no /proc", "{mode:?}");
        }
        let path = std::env::var("PATH").unwrap_or_default();
        for (key, value) in std::env::vars() {
            // What the jail is given on purpose: its own variables (the server's PATH).
            if ["PATH", "LANG", "HOME"].contains(&key.as_str())
                || value.len() < 6
                || path.contains(&value)
            {
                continue;
            }
            assert!(
                !said.contains(&value),
                "{mode:?}: the jail reads the server's {key}: {said}"
            );
        }
        for order in [
            format!("read {}", store.display()),
            format!("read {}", other.join("notes.txt").display()),
            format!("read {}/config.yaml", env!("CARGO_MANIFEST_DIR")),
            format!("list {}", dir.path().join("ws").display()),
            "read /etc/shadow".to_string(),
        ] {
            let said = echo_in(&c, &ws, &order, mode).await.unwrap();
            assert!(said.starts_with("refused"), "{mode:?} {order}: {said}");
        }
        // The folder above its state folder holds only the way there.
        let said = echo_in(&c, &ws, &format!("list {}", dir.path().display()), mode)
            .await
            .unwrap();
        assert_eq!(said, "listed fixture-state", "{mode:?}");
        // What it was given is there: its own state folder.
        let said = echo_in(&c, &ws, &format!("list {}", state.display()), mode)
            .await
            .unwrap();
        assert!(said.starts_with("listed"), "{said}");
    }
}

/// Nothing an upstream writes can raise privileges on the host: its setuid and setgid modes are
/// refused, and under a root server its `read_write` folder is written through an idmapped view
/// as `workspace.host_uid` (10001), so no file there is root's; a folder that is not that
/// user's is refused, naming the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_plants_nothing_setuid_or_roots_in_its_folders() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let owner = bulkhead::workspace::HostOwner::for_this_process(10001)
        .unwrap()
        .map(Arc::new);
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let uid = match &owner {
        Some(o) => {
            // Root's folder first: refused, since the upstream could not write it.
            let c = misbehaving("snoop", &state, json!({})).with_host_owner(owner.clone());
            let refused = echo(&c, &ws, "start").await.unwrap_err().wire_text();
            assert!(
                refused.contains("belongs to uid 0") && refused.contains("chown -R 10001:10001"),
                "{refused}"
            );
            std::os::unix::fs::chown(&state, Some(o.uid()), Some(o.uid())).unwrap();
            o.uid()
        }
        None => nix::unistd::geteuid().as_raw(),
    };
    let c = misbehaving("snoop", &state, json!({})).with_host_owner(owner.clone());
    let said = echo(&c, &ws, &format!("plant {}", state.display()))
        .await
        .unwrap();
    assert_eq!(said, "planted: planted refused 1, elf refused 1");
    let mut seen = 0;
    for e in std::fs::read_dir(&state).unwrap().flatten() {
        let meta = e.metadata().unwrap();
        assert_eq!(meta.uid(), uid, "{:?} belongs to {}", e.path(), meta.uid());
        assert_eq!(meta.permissions().mode() & 0o6000, 0, "{:?}", e.path());
        seen += 1;
    }
    // `starts` (written at its start), `planted` and `elf`.
    assert_eq!(seen, 3);
}

/// An upstream and everything it starts live in a cgroup of their own (as root here): one that
/// allocates without end is stopped at `memory_mb`, the call gets a retryable error, and the
/// server goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_upstream_is_stopped_by_its_cgroup() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving(
        "bomb",
        dir.path(),
        json!({"memory_mb": 128, "call_timeout_ms": 30000}),
    );
    let t = Instant::now();
    let e = echo(&c, &ws, "eat").await.unwrap_err();
    // Killed (the connection closed), not timed out after hoarding 2 GiB.
    assert!(
        !e.is_fatal() && e.wire_text().contains("failed during"),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

/// Upstreams of sessions are bounded: when `max_sessions` are all in a call, another session's
/// call is refused naming the limit (nothing waits unbounded, nothing starts past it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_of_sessions_are_bounded_by_max_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let root = bulkhead::workspace::WorkspaceRoot::new(dir.path().join("ws")).unwrap();
    let session = |user: &str| {
        std::sync::Arc::new(
            root.session(&bulkhead::identity::Identity::new(user, "s1").unwrap())
                .unwrap(),
        )
    };
    let c = std::sync::Arc::new(misbehaving(
        "hang",
        dir.path(),
        json!({"session_workspace": true, "max_sessions": 1, "call_timeout_ms": 20000}),
    ));
    let ana = session("ana");
    let busy = {
        let (c, ana) = (c.clone(), ana.clone());
        tokio::spawn(async move { echo_in(&c, &ana, "wait", NetworkMode::Full).await })
    };
    // Ana's upstream has started and holds her call (the fixture counts its starts).
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(dir.path().join("starts"))
        .unwrap_or_default()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "ana's upstream never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let e = echo_in(&c, &session("ben"), "hi", NetworkMode::Full)
        .await
        .unwrap_err();
    assert!(
        !e.is_fatal() && e.wire_text().contains("fixture.max_sessions"),
        "{e:?}"
    );
    busy.abort();
}

/// Waits (bounded) until the fixture has been told to cancel `n` requests; returns their ids.
async fn cancelled(state: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(state.join("cancelled")).unwrap_or_default();
        let ids: Vec<String> = text.lines().map(str::to_string).collect();
        if ids.len() >= n {
            return ids;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream was told to cancel {} of {n} requests",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A hanging upstream: the call ends at its time limit with a retryable error, and the
/// upstream is told to stop that request; a caller who goes away cancels it the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_upstream_is_bounded_by_the_call_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("hang", dir.path(), json!({"call_timeout_ms": 500}));
    let t = Instant::now();
    let e = echo(&c, &ws, "wait").await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert!(e.wire_text().contains("fixture.call_timeout_ms"), "{e:?}");
    assert_eq!(cancelled(dir.path(), 1).await.len(), 1);
    // The caller goes away before the limit: the call future is dropped.
    let c = misbehaving("hang", dir.path(), json!({"call_timeout_ms": 60000}));
    let gone = tokio::time::timeout(Duration::from_millis(1500), echo(&c, &ws, "wait")).await;
    assert!(gone.is_err());
    assert_eq!(cancelled(dir.path(), 2).await.len(), 2);
}

/// The upstream's progress on a call reaches that call's signals (and from there the client's
/// `notifications/progress`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_progress_reaches_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("progress", dir.path(), json!({}));
    let signals = CallSignals::new();
    let args = json!({"message": "go"}).as_object().cloned().unwrap();
    let jail = connectors::sandbox::JailContext::outside_a_call(NetworkMode::Full);
    let call = connectors::call_in(&c, "fixture", "echo", &ws, args, &jail, &signals);
    // While the call is in flight, its progress arrives; then the fixture may answer.
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(p) = signals.progress()
                && p.done == 3
            {
                assert_eq!((p.total, p.unit), (Some(3), bulkhead::signals::Unit::Steps));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no progress: {:?}",
                signals.progress()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        std::fs::write(dir.path().join("release"), "").unwrap();
    };
    let (out, ()) = tokio::join!(call, watch);
    assert!(matches!(out.unwrap(), bulkhead::server::ToolOutput::Text(ref t) if t == "echo: go"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_a_huge_message_and_ten_thousand_tools_are_refused_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    for (mode, extra, says) in [
        ("huge", json!({"max_message_bytes": 1048576}), "failed"),
        ("many", json!({}), "more than 1000 tools"),
    ] {
        let c = misbehaving(mode, dir.path(), extra);
        let e = echo(&c, &ws, "x").await.unwrap_err();
        assert!(
            !e.is_fatal() && e.wire_text().contains(says),
            "{mode}: {e:?}"
        );
    }
    // A line of garbage: the call fails or times out (bounded), and the server goes on.
    let c = misbehaving("garbage", dir.path(), json!({"call_timeout_ms": 1000}));
    let t = Instant::now();
    let _ = echo(&c, &ws, "x").await;
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_policy_does_not_allow_is_refused_and_the_call_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let c = misbehaving("sampling", dir.path(), json!({}));
    assert_eq!(echo(&c, &ws, "hi").await.unwrap(), "echo: hi");
    // The upstream got a refusal (an error answer, no sampling result), written by the fixture
    // as it reads it: wait for it, bounded.
    let answer = dir.path().join("sampling-answer");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answer.exists() {
        assert!(
            Instant::now() < deadline,
            "the upstream never got an answer"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let said: Value = loop {
        if let Ok(v) = serde_json::from_str(&std::fs::read_to_string(&answer).unwrap_or_default()) {
            break v;
        }
        assert!(Instant::now() < deadline, "unreadable answer");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        said.get("error").is_some() && said.get("result").is_none(),
        "{said}"
    );
}

/// The real `mcp-server-time` behind the generated `third_party` server: a declared tool
/// answers, the upstream's own names are not tools here, and reading the confidential one
/// moves the session up and blocks every connect tool of the trust domain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_upstream_serves_only_declared_tools_under_the_ratchet() {
    let bin = tokio::task::spawn_blocking(mcp_server_time).await.unwrap();
    let mut dep = Deployment::new(Store::Sqlite, "upstream").await;
    dep.set_env("MCP_SERVER_TIME", bin.to_str().unwrap());
    let full = dep.try_start_server("third_party", "full", None).unwrap();
    let proxied = dep
        .try_start_server("third_party", "proxied", None)
        .unwrap();
    let template = dep.start("full", None);
    let c = client(&full.url, "ana", "up1").await;
    let tools = c.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "annotated_message",
            "convert_meeting_time",
            "current_time",
            "fetch_page",
            "read_file"
        ],
        "{names:?}"
    );
    let r = call(&c, "current_time", json!({"timezone": "Europe/Paris"}))
        .await
        .unwrap();
    assert!(!r.is_error && r.text.contains("Europe/Paris"), "{}", r.text);
    // The upstream's own tool names are not tools of this server.
    match call(&c, "get_current_time", json!({"timezone": "UTC"})).await {
        Err(e) => assert!(e.contains("unknown tool"), "{e}"),
        Ok(r) => assert!(r.is_error && r.text.contains("unknown tool"), "{}", r.text),
    }
    // And audited (the audit log of `third_party`, written in batches: wait, bounded).
    let log = dep.path().join("state/audit-third_party.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().any(|l| {
            l.contains("\"tool\":\"get_current_time\"") && l.contains("\"outcome\":\"error\"")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the refused call was not audited: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The confidential tool: refused on full, served on proxied, and the session moves up.
    let r = call(
        &c,
        "convert_meeting_time",
        json!({"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}),
    )
    .await
    .unwrap();
    assert!(r.is_error, "{}", r.text);
    let p = client(&proxied.url, "ana", "up1").await;
    let r = call(
        &p,
        "convert_meeting_time",
        json!({"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}),
    )
    .await
    .unwrap();
    assert!(!r.is_error && r.text.contains("18:30"), "{}", r.text);
    assert_eq!(r.level, "confidential");
    // Every connect tool of the trust domain is refused now; nothing reaches the webhook.
    let t = client(&template.url, "ana", "up1").await;
    let r = call(&t, "notify_team", notify("meeting at 18:30 Tokyo"))
        .await
        .unwrap();
    assert!(r.is_error && r.text.starts_with("[FATAL]"), "{}", r.text);
    assert!(dep.webhook.delivered("18:30").is_empty());
    for c in [c, p, t] {
        let _ = c.cancel().await;
    }
}

/// Installs `package@version` under `target/upstreams` with npm, unless it is there.
fn npm_install(package: &str, version: &str) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = super::harness::target_dir().join("upstreams");
    let ready = std::fs::read_to_string(dir.join(format!("node_modules/{package}/package.json")))
        .is_ok_and(|t| t.contains(&format!("\"version\": \"{version}\"")));
    if ready {
        return;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let pinned = format!("{package}@{version}");
    let ok = Command::new("npm")
        .args([
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--save-exact",
            &pinned,
        ])
        .current_dir(&dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "could not install {pinned} (needs Node.js 20+, npm and the npm registry)"
    );
}

/// `@modelcontextprotocol/server-everything` at its pinned version, under `target/` (npm).
fn server_everything() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        npm_install("@modelcontextprotocol/server-everything", "2026.8.31");
        super::harness::target_dir().join("upstreams/node_modules/.bin/mcp-server-everything")
    })
    .clone()
}

/// `bulkhead import mcp` on a real third-party server: the specs it writes fail the build with
/// one diagnostic per tool until a person writes each tool's permission and sensitivity; then
/// they build, and the lock pins every listed tool.
#[test]
fn import_leaves_each_tool_to_a_person_and_the_build_refuses_until_then() {
    let bin = server_everything();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("specs")).unwrap();
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/schema");
    std::fs::create_dir_all(root.join("specs/schema")).unwrap();
    for f in std::fs::read_dir(&schema).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, root.join("specs/schema").join(f.file_name().unwrap())).unwrap();
    }
    let exe = env!("CARGO_BIN_EXE_bulkhead");
    let out = Command::new(exe)
        .args([
            "import",
            "mcp",
            "--name",
            "everything",
            "--package",
            "npm:@modelcontextprotocol/server-everything@2026.8.31",
            "--root",
        ])
        .arg(root)
        .arg("--")
        .arg(&bin)
        .arg("stdio")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("specs/connectors/everything.lock.json")).unwrap(),
    )
    .unwrap();
    let tools = lock["tools"].as_object().unwrap().len();
    assert!(tools >= 5, "{lock}");
    assert!(lock["server"].as_str().unwrap().contains('@'));
    // The spec starts the program by name, not by this machine's path, and says how to here.
    let spec = std::fs::read_to_string(root.join("specs/connectors/everything.yaml")).unwrap();
    assert!(
        spec.contains(r#"command: ["${MCP_EVERYTHING:-mcp-server-everything}","stdio"]"#)
            && !spec.contains(bin.to_str().unwrap()),
        "{spec}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("MCP_EVERYTHING={}", bin.display())),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let check = Command::new(exe)
        .args(["check", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(!check.status.success());
    let text = String::from_utf8_lossy(&check.stderr).to_string()
        + &String::from_utf8_lossy(&check.stdout);
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("error: ") && !l.contains("could not generate"))
        .collect();
    assert_eq!(errors.len(), tools, "one diagnostic per tool:\n{text}");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("is missing `permission` and `sensitivity`")),
        "{text}"
    );
    // A person decides each tool: then it builds.
    let server = root.join("specs/servers/everything.yaml");
    let spec = std::fs::read_to_string(&server).unwrap();
    std::fs::write(
        &server,
        spec.replace(
            "    context: default\n",
            "    context: default\n    permission: read\n    sensitivity: internal\n",
        ),
    )
    .unwrap();
    let check = Command::new(exe)
        .args(["check", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// An upstream reached over Streamable HTTP (`url`, a bearer token in `headers`): a real
/// Bulkhead `template` instance on loopback stands in for a remote MCP server. Its `write_file`
/// and `read_file` are pinned from its live listing; `read_file` is declared, `write_file` is
/// not, so only the first exists here; a wrong token is refused by the upstream (no handshake).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_over_streamable_http_is_pinned_and_called() {
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let up = super::harness::start(dir.clone(), bulkhead::policy::NetworkMode::Full, true).await;
    let token = super::harness::token("remote", "r1");
    // On loopback, which a `url` upstream reaches only where `reach_private` opens it.
    let closed = json!({
        "url": up.url,
        "headers": {"Authorization": format!("Bearer {token}")},
        "call_timeout_ms": 10000,
    });
    let Err(refused) = bulkhead::connectors::mcp::lockfile::list("remote", closed).await else {
        panic!("a url upstream on loopback was listed without reach_private");
    };
    let refused = format!("{refused:#}");
    assert!(
        refused.contains("127.0.0.1 is loopback"),
        "a url upstream on loopback without reach_private: {refused}"
    );
    let settings = json!({
        "url": up.url,
        "headers": {"Authorization": format!("Bearer {token}")},
        "call_timeout_ms": 10000,
        "reach_private": ["127.0.0.0/8"],
    });
    let listing = bulkhead::connectors::mcp::lockfile::list("remote", settings.clone())
        .await
        .unwrap();
    assert_eq!(listing.server.split('@').next(), Some("bulkhead-template"));
    let read = listing
        .tools
        .iter()
        .find(|(t, _)| t.name == "read_file")
        .unwrap();
    let pin = bulkhead::connectors::mcp::pin::pin_of(&read.1);
    let ops = vec![OperationDef {
        name: "read",
        params_schema: r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#,
        body: body(OperationBody::Mcp {
            tool: "read_file".into(),
            pin,
            definition: read.1.to_string(),
            server: listing.server.clone(),
            remote: true,
            renames: Vec::new(),
        }),
    }];
    let def: &'static ConnectorDef = leak(ConnectorDef {
        secrets: &[],
        name: "remote",
        kind: bulkhead_vocab::connector::ConnectorKind::Mcp,
        sensitivity: bulkhead::policy::Sensitivity::Internal,
        settings: s(settings.to_string()),
        operations: Box::leak(ops.into_boxed_slice()),
    });
    let c = Connectors::new([def], &|_| None).unwrap();
    let ws = workspace(dir.path());
    // The upstream's own session has no such file: its error comes back as a retryable one.
    let args = json!({"path": "/workspace/none.txt"})
        .as_object()
        .cloned()
        .unwrap();
    let e = connectors::call(&c, "remote", "read", &ws, args, &CallSignals::new())
        .await
        .unwrap_err();
    assert!(
        !e.is_fatal() && e.wire_text().contains("answered an error"),
        "{e:?}"
    );
    assert!(c.probe().await.iter().all(|(_, r)| r.is_ok()));
    // A wrong token: the upstream refuses the handshake; a retryable error, nothing hangs.
    let mut bad = settings.clone();
    bad["headers"]["Authorization"] = json!("Bearer not-a-token");
    assert!(
        bulkhead::connectors::mcp::lockfile::list("remote", bad)
            .await
            .is_err()
    );
}

/// `@modelcontextprotocol/server-filesystem` at its pinned version, under `target/` (npm).
fn server_filesystem() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        npm_install("@modelcontextprotocol/server-filesystem", "2026.8.31");
        super::harness::target_dir().join("upstreams/node_modules/.bin/mcp-server-filesystem")
    })
    .clone()
}

/// A connector over the real filesystem server, one per session, declaring `tools` pinned to
/// what the server lists now (as `bulkhead mcp lock` writes the lock).
async fn filesystem(tools: &[&'static str], extra: Value) -> Connectors {
    let mut settings = json!({
        "command": [server_filesystem().to_str().unwrap(), "/workspace"],
        "session_workspace": true,
        "start_timeout_ms": 20000,
        "call_timeout_ms": 10000,
    });
    for (k, v) in extra.as_object().unwrap() {
        settings[k] = v.clone();
    }
    pinned("fs", settings, tools).await.0
}

/// Connector `name` over the upstream of `settings`, declaring `tools` pinned to what it lists
/// now (as `bulkhead mcp lock` writes the lock); and the protocol version it settled on.
async fn pinned(
    name: &'static str,
    settings: Value,
    tools: &[&'static str],
) -> (Connectors, String) {
    let listing = bulkhead::connectors::mcp::lockfile::list(name, settings.clone())
        .await
        .unwrap();
    let ops: Vec<OperationDef> = tools
        .iter()
        .map(|&name| {
            let (tool, definition) = listing
                .tools
                .iter()
                .find(|(t, _)| t.name == name)
                .unwrap_or_else(|| panic!("the upstream lists no `{name}`"));
            OperationDef {
                name,
                params_schema: s(serde_json::to_string(&tool.input_schema).unwrap()),
                body: body(OperationBody::Mcp {
                    tool: name.into(),
                    pin: bulkhead::connectors::mcp::pin::pin_of(definition),
                    definition: definition.to_string(),
                    server: listing.server.clone(),
                    remote: false,
                    renames: Vec::new(),
                }),
            }
        })
        .collect();
    let def: &'static ConnectorDef = leak(ConnectorDef {
        secrets: &[],
        name,
        kind: bulkhead_vocab::connector::ConnectorKind::Mcp,
        sensitivity: bulkhead::policy::Sensitivity::Internal,
        settings: s(settings.to_string()),
        operations: Box::leak(ops.into_boxed_slice()),
    });
    (Connectors::new([def], &|_| None).unwrap(), listing.protocol)
}

/// The real filesystem server, one process per session: each session's server has that
/// session's own folder at `/workspace` and nothing else; host paths never reach the model;
/// escapes are refused; the number of running servers is bounded (the least recently used idle
/// one makes room); and a session past its disk limit gets no further call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_server_gets_each_session_its_own_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = bulkhead::workspace::WorkspaceRoot::new(dir.path().join("ws"))
        .unwrap()
        .with_limits(bulkhead::workspace::DiskLimits {
            max_bytes: 64 << 10,
            ..Default::default()
        });
    let session = |user: &str| {
        std::sync::Arc::new(
            root.session(&bulkhead::identity::Identity::new(user, "s1").unwrap())
                .unwrap(),
        )
    };
    let (ana, ben) = (session("ana"), session("ben"));
    let c = filesystem(
        &[
            "write_file",
            "read_text_file",
            "list_allowed_directories",
            "list_directory",
        ],
        json!({"max_sessions": 1}),
    )
    .await;
    let host = dir.path().to_str().unwrap().to_string();
    let said = call_on(&c, "fs", &ana, "list_allowed_directories", json!({}))
        .await
        .unwrap();
    assert!(
        said.contains("/workspace") && !said.contains(&host),
        "{said}"
    );
    let said = call_on(
        &c,
        "fs",
        &ana,
        "write_file",
        json!({"path": "/workspace/notes.txt", "content": "ana's notes"}),
    )
    .await
    .unwrap();
    assert!(!said.contains(&host), "{said}");
    assert_eq!(
        std::fs::read_to_string(ana.host_path().join("notes.txt")).unwrap(),
        "ana's notes"
    );
    // Ben's server (it takes the one slot: Ana's is idle) has Ben's folder only.
    let e = call_on(
        &c,
        "fs",
        &ben,
        "read_text_file",
        json!({"path": "/workspace/notes.txt"}),
    )
    .await
    .unwrap_err();
    assert!(!e.wire_text().contains(&host), "{e:?}");
    for escape in [
        "/workspace/../ana/s1/notes.txt",
        "/etc/passwd",
        "../../ana/s1/notes.txt",
        &format!("{}/notes.txt", ana.host_path().display()),
    ] {
        let r = call_on(&c, "fs", &ben, "read_text_file", json!({"path": escape})).await;
        let text = match &r {
            Ok(t) => t.clone(),
            Err(e) => e.wire_text(),
        };
        assert!(
            r.is_err() && !text.contains("ana's notes"),
            "{escape}: {text}"
        );
        // (A host path the caller wrote comes back in the refusal; no other does.)
        assert!(
            escape.starts_with(&host) || !text.contains(&host),
            "{escape}: {text}"
        );
    }
    // Ana again: her server starts anew over the same folder.
    let said = call_on(
        &c,
        "fs",
        &ana,
        "read_text_file",
        json!({"path": "/workspace/notes.txt"}),
    )
    .await
    .unwrap();
    assert_eq!(said, "ana's notes");
    // Past the session's disk limit (the server writes on its own: the next call is refused).
    let big = "x".repeat(80 << 10);
    call_on(
        &c,
        "fs",
        &ana,
        "write_file",
        json!({"path": "/workspace/big.txt", "content": big}),
    )
    .await
    .unwrap();
    let e = call_on(
        &c,
        "fs",
        &ana,
        "list_directory",
        json!({"path": "/workspace"}),
    )
    .await
    .unwrap_err();
    assert!(e.wire_text().contains("workspace.max_bytes"), "{e:?}");
    // Ben is not affected.
    let said = call_on(
        &c,
        "fs",
        &ben,
        "list_directory",
        json!({"path": "/workspace"}),
    )
    .await
    .unwrap();
    assert!(!said.contains("notes.txt"), "{said}");
}

/// Both protocol eras on the upstream side, each with a real server nobody here wrote: the
/// current `mcp-server-time` answers `server/discover` (stateless 2026-07-28), and
/// `server-everything` only knows `initialize` (2025-11-25 sessions); a declared tool of each
/// answers through the same wrapper.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_protocol_eras_with_real_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let time = tokio::task::spawn_blocking(mcp_server_time).await.unwrap();
    let (c, protocol) = pinned(
        "clock",
        json!({"command": [time.to_str().unwrap(), "--local-timezone", "UTC"]}),
        &["get_current_time"],
    )
    .await;
    assert_eq!(protocol, "2026-07-28");
    let said = call_on(
        &c,
        "clock",
        &ws,
        "get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
    )
    .await
    .unwrap();
    assert!(said.contains("Asia/Tokyo"), "{said}");
    let everything = tokio::task::spawn_blocking(server_everything)
        .await
        .unwrap();
    let (c, protocol) = pinned(
        "everything",
        json!({"command": [everything.to_str().unwrap()]}),
        &["echo"],
    )
    .await;
    assert_eq!(protocol, "2025-11-25");
    let said = call_on(
        &c,
        "everything",
        &ws,
        "echo",
        json!({"message": "both eras"}),
    )
    .await
    .unwrap();
    assert!(said.contains("both eras"), "{said}");
}

/// A camelCase parameter of a real upstream (`get-annotated-message`'s `messageType` and
/// `includeImage` in `server-everything`) is exposed under a spec name (`message_type`) and
/// reaches the upstream under its own (`upstream:` in the spec, `renames` here); without the
/// mapping the upstream refuses the call, naming its parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_camel_case_parameter_reaches_the_upstream_under_its_own_name() {
    let bin = tokio::task::spawn_blocking(server_everything)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let settings = json!({
        "command": [bin.to_str().unwrap(), "stdio"],
        "start_timeout_ms": 30000,
        "call_timeout_ms": 10000,
    });
    let listing = bulkhead::connectors::mcp::lockfile::list("everything", settings.clone())
        .await
        .unwrap();
    let (_, definition) = listing
        .tools
        .iter()
        .find(|(t, _)| t.name == "get-annotated-message")
        .expect("server-everything lists get-annotated-message");
    let connector = |renames: &'static [(&'static str, &'static str)]| {
        let ops = vec![OperationDef {
            name: "annotated",
            params_schema: r#"{"type":"object","properties":{"message_type":{"type":"string"},"include_image":{"type":"boolean"}},"required":["message_type"]}"#,
            body: body(OperationBody::Mcp {
                tool: "get-annotated-message".into(),
                pin: bulkhead::connectors::mcp::pin::pin_of(definition),
                definition: definition.to_string(),
                server: listing.server.clone(),
                remote: false,
                renames: renames
                    .iter()
                    .map(|(o, t)| (o.to_string(), t.to_string()))
                    .collect(),
            }),
        }];
        let def: &'static ConnectorDef = leak(ConnectorDef {
            secrets: &[],
            name: "everything",
            kind: bulkhead_vocab::connector::ConnectorKind::Mcp,
            sensitivity: bulkhead::policy::Sensitivity::Internal,
            settings: s(settings.to_string()),
            operations: Box::leak(ops.into_boxed_slice()),
        });
        Connectors::new([def], &|_| None).unwrap()
    };
    let mapped = connector(&[
        ("include_image", "includeImage"),
        ("message_type", "messageType"),
    ]);
    let said = call_on(
        &mapped,
        "everything",
        &ws,
        "annotated",
        json!({"message_type": "error"}),
    )
    .await
    .unwrap();
    assert!(said.to_lowercase().contains("error"), "{said}");
    let unmapped = connector(&[]);
    let refused = call_on(
        &unmapped,
        "everything",
        &ws,
        "annotated",
        json!({"message_type": "error"}),
    )
    .await
    .unwrap_err();
    assert!(refused.wire_text().contains("messageType"), "{refused:?}");
}

/// A start that fails says why and what to do: a program the jail cannot find is named "not
/// found" with the jail's own words; `npx -y <package>` (every upstream README's form) is told
/// that a jail has no network to download into and how to install the package first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_says_why_and_what_to_do() {
    let missing = bulkhead::connectors::mcp::lockfile::list(
        "missing",
        json!({"command": ["/nonexistent/bin/mcp-server-missing"], "start_timeout_ms": 10000}),
    )
    .await
    .err()
    .expect("a missing program does not start")
    .to_string();
    assert!(
        missing.contains("is not found in the upstream's jail") && missing.contains("execvp"),
        "{missing}"
    );
    // npx comes with npm, which the test command installs.
    let npx = bulkhead::connectors::mcp::lockfile::list(
        "npx",
        json!({"command": ["npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"], "start_timeout_ms": 3000}),
    )
    .await
    .err()
    .expect("npx cannot download in a jail")
    .to_string();
    assert!(
        npx.contains("downloads the package at start") && npx.contains("npm install --prefix"),
        "{npx}"
    );
    eprintln!("{missing}\n{npx}");
}

/// A networked upstream (`egress:` on a launched `mcp` connector) reaches its declared host only
/// while one of its calls is in flight: during a call its request arrives; a sender it leaves
/// running on a thread of its own after the call returned is refused by the gate, every time,
/// and the host is never contacted. In a network namespace with only loopback.
#[test]
fn a_networked_upstream_reaches_out_only_while_one_of_its_calls_runs() {
    use super::jail_egress::{OUTSIDE, Outside, in_fresh_netns};
    in_fresh_netns(|| async {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("fixture-state");
        std::fs::create_dir_all(&state).unwrap();
        let ws = workspace(dir.path());
        let outside = Outside::start("ok").await;
        let target = format!("{OUTSIDE}:{}", outside.port);
        let c = misbehaving_with(
            "snoop",
            &state,
            json!({ "egress": [target] }),
            &|k: &str| {
                (k == "BULKHEAD_JAIL_HELPER").then(|| env!("CARGO_BIN_EXE_bulkhead").to_string())
            },
        );
        let said = echo_in(
            &c,
            &ws,
            &format!("fetch http://{target}/now"),
            NetworkMode::Full,
        )
        .await
        .unwrap();
        assert!(said.starts_with("fetched 200"), "{said}");
        assert_eq!(outside.accepted(), 1);
        let said = echo_in(
            &c,
            &ws,
            &format!("background http://{target}/later"),
            NetworkMode::Full,
        )
        .await
        .unwrap();
        assert_eq!(said, "started");
        let log = state.join("background");
        let deadline = Instant::now() + Duration::from_secs(20);
        let tries = loop {
            let lines: Vec<String> = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect();
            if lines.len() >= 5 {
                break lines;
            }
            assert!(
                Instant::now() < deadline,
                "the sender did not run: {lines:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(
            tries
                .iter()
                .all(|l| l.starts_with("refused") && l.contains("403")),
            "{tries:?}"
        );
        assert_eq!(outside.accepted(), 1, "the host was reached between calls");
    });
}

static ECHO_TOOLS: &[bulkhead::codegen::ToolDef] = &[bulkhead::codegen::ToolDef {
    name: "echo",
    title: None,
    description: "Echo the message back (an upstream server's tool).",
    permission: bulkhead::policy::Permission::Read,
    context: "default",
    sensitivity: bulkhead::policy::Sensitivity::Public,
    annotations: bulkhead::codegen::Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    },
    input_schema: r#"{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}"#,
    output_schema: None,
    dataset: "fixture:echo",
    rate_limit: None,
    approval: None,
    inspection: bulkhead::codegen::Inspection::On,
    bound: &[],
    target: bulkhead::codegen::Target::Connector {
        connector: "fixture",
        operation: "echo",
    },
}];

static ECHO_SERVER: bulkhead::codegen::ServerDef = bulkhead::codegen::ServerDef {
    name: "upstream_echo",
    instructions: "",
    tools: ECHO_TOOLS,
    resources: &[],
    prompts: &[],
    presets: &[],
};

/// What a real upstream MCP server returns is inspected like any result: a key pair it echoes
/// reaches the caller redacted, and the session is `secret` from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_an_upstream_server_returns_is_redacted_and_raises_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    let defs: &'static [ConnectorDef] =
        Box::leak(vec![fixture_def("well", &state, json!({}))].into_boxed_slice());
    let server = bulkhead::server::Server::new(&ECHO_SERVER, defs, bulkhead::server::NoHandlers);
    let store = std::sync::Arc::new(
        bulkhead::state::StateStore::create_sqlite(
            &dir.path().join("state/compliance.db"),
            bulkhead::state::StoreOptions::new("t"),
        )
        .unwrap(),
    );
    let rt = bulkhead::call::Runtime::new(
        server,
        NetworkMode::None,
        bulkhead::context::Presets::builtin(),
        bulkhead::workspace::WorkspaceRoot::new(dir.path().join("ws")).unwrap(),
        store,
        bulkhead::audit::AuditLog::open_file(
            &dir.path().join("state/audit.jsonl"),
            bulkhead::audit::AuditOptions::default(),
        )
        .unwrap(),
    )
    .expect("runtime");
    let u = bulkhead::identity::Identity::new("ana", "up-leak").unwrap();
    let msg = "deploy with ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8 and AKIAUJZDE8GXD6NCF10E";
    let out = rt
        .call(&u, "echo", json!({"message": msg}).as_object().cloned())
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.contains("[redacted: github-pat]")
            && out.text.contains("[redacted: aws-access-token]"),
        "{}",
        out.text
    );
    assert!(
        !out.text.contains("ghp_SmEH") && !out.text.contains("AKIAUJZDE8"),
        "{}",
        out.text
    );
    assert_eq!(out.level, bulkhead::policy::Sensitivity::Secret);
}
