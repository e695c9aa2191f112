//! The example deployment under `bulkhead up` with real network namespaces, nftables and the real
//! egress proxy (squid running the generated policy), run as root in CI too. An "outside" network
//! namespace on the egress bridge holds two HTTPS stand-ins signed by a test CA: one on the
//! proxied allowlist, one not.
//!
//! Proven here: every tool of the template server succeeds on the instance the client routes it
//! to (through `bulkhead connect`, as desktop clients use it), with real data; each instance's
//! mount namespace hides the workspace layers above it and mounts the ones below read-only; the proxied
//! instance reaches the allowlisted stand-in only through the proxy; the none instance reaches
//! nothing; an instance whose namespace gains a route out stops serving within its recheck; an
//! instance started with `--mode none` on a network with a route out refuses to serve.

use bulkhead::codegen::{DeployedServerDef, DeploymentDef};
use bulkhead::isolation::netns::{HostLink, Netns};
use bulkhead::isolation::up::{UpOptions, up};
use bulkhead::policy::NetworkMode;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::tls;

const SUBNET: u8 = 241;

/// The example deployment's server `server` alone (the same spec, sensitivity and instances) on
/// a port of its own, as deployment `name`.
fn deployed(server: &str, port: u16, name: &'static str) -> &'static DeploymentDef {
    let local = bulkhead_example::servers::DEPLOYMENTS
        .iter()
        .find(|d| d.name == "local")
        .expect("the example deployment");
    let t = local
        .servers
        .iter()
        .find(|s| s.name == server)
        .unwrap_or_else(|| panic!("{server} is deployed"));
    let servers: &'static [DeployedServerDef] = Box::leak(Box::new([DeployedServerDef {
        name: t.name,
        port,
        egress: t.egress,
        proxied_egress: t.proxied_egress,
        internal_ranges: t.internal_ranges,
        max_sensitivity: t.max_sensitivity,
    }]));
    Box::leak(Box::new(DeploymentDef { name, servers }))
}

/// The example deployment's one server (the same spec, sensitivity and instances) on a port of
/// its own, with the allowlist pointed at the outside stand-in.
fn example() -> &'static DeploymentDef {
    deployed("template", 8100, "isolation_test")
}

/// `third_party` alone under `bulkhead up` on `port`, its upstream started as `program`, with
/// state under `dir` and an empty proxied allowlist.
fn third_party_up(
    dir: &std::path::Path,
    port: u16,
    subnet: u8,
    prefix: &str,
    program: &std::path::Path,
) -> bulkhead::isolation::up::Running {
    let name: &'static str = Box::leak(format!("third_party_{prefix}").into_boxed_str());
    let dep = deployed("third_party", port, name);
    let opts = UpOptions {
        config: Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml")),
        subnet,
        prefix: prefix.into(),
        proxied_egress: Some(Vec::new()),
        env: vec![
            (
                "BULKHEAD_STATE_DIR".to_string(),
                dir.join("state").display().to_string(),
            ),
            (
                "BULKHEAD_WORKSPACES".to_string(),
                dir.join("ws").display().to_string(),
            ),
            ("MCP_SERVER_TIME".to_string(), program.display().to_string()),
        ],
        ..UpOptions::new(env!("CARGO_BIN_EXE_bulkhead").into())
    };
    let running = up(dep, &opts).expect("up (needs root, ip, nft and squid)");
    assert_eq!(
        running.instances.iter().map(|i| i.mode).collect::<Vec<_>>(),
        [NetworkMode::Full, NetworkMode::Proxied]
    );
    running
}

/// One tool call over Streamable HTTP as `user`: (is_error, text).
async fn http_call(url: &str, user: &str, tool: &str, args: Value) -> (bool, String) {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.to_string(),
        )
        .auth_header(dev_token(user, &format!("{user}-1"))),
    );
    let c = ().serve(transport).await.unwrap();
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        c.call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().unwrap().clone()),
        ),
    )
    .await
    .expect("an answer within 60 s")
    .unwrap();
    let _ = c.cancel().await;
    let text = r
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect();
    (r.is_error.unwrap_or(false), text)
}

/// Tries a TCP connection from inside `ns` (None: the host namespace) with a 2 s timeout.
fn connects_from(ns: Option<&str>, addr: &str) -> bool {
    let (host, port) = addr.split_once(':').unwrap();
    let code = format!(
        "import socket,sys\ntry:\n socket.create_connection(('{host}',{port}),timeout=2).close()\nexcept Exception as e:\n sys.exit(1)\n"
    );
    python_in(ns, &code).0
}

/// `CONNECT target` through `proxy` from inside `ns`: the proxy's status line.
fn connect_via(ns: &str, proxy: &str, target: &str) -> String {
    let (host, port) = proxy.split_once(':').unwrap();
    let code = format!(
        "import socket\ns=socket.create_connection(('{host}',{port}),timeout=5)\ns.sendall(b'CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n')\nprint(s.recv(200).decode().splitlines()[0])\n"
    );
    python_in(Some(ns), &code).1
}

fn python_in(ns: Option<&str>, code: &str) -> (bool, String) {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "python3", "-c", code]);
            c
        }
        None => {
            let mut c = Command::new("python3");
            c.args(["-c", code]);
            c
        }
    };
    let out = cmd.stderr(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

fn healthz(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let hostport = rest.split('/').next().unwrap();
    let mut s = std::net::TcpStream::connect(hostport).unwrap();
    write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        hostport.split(':').next().unwrap()
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let status = buf[9..12].parse().unwrap();
    (
        status,
        buf.split("\r\n\r\n").nth(1).unwrap_or("").to_string(),
    )
}

fn dev_token(user: &str, session: &str) -> String {
    let config = bulkhead::config::Config::load(Some(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml"),
    ))
    .unwrap();
    let secret = config.auth.keys[0].secret.clone().unwrap();
    let claims = bulkhead::auth::MintClaims {
        sub: user.into(),
        session_id: session.into(),
        iss: config.auth.issuer,
        aud: config.auth.audience,
        ttl_secs: 600,
    };
    bulkhead::auth::mint::mint_hs256(secret.as_bytes(), &claims).unwrap()
}

/// The example's data: a records database and the two log folders, with known contents.
fn seed(dir: &std::path::Path) -> Vec<(String, String)> {
    let db = dir.join("records.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE records (id INTEGER PRIMARY KEY, title TEXT NOT NULL, owner TEXT NOT NULL);
         INSERT INTO records (title, owner) VALUES ('Acme renewal #100', 'ana'), ('Globex audit #101', 'ben');",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(
        dir.join("logs/app.log"),
        "2026-11-22T08:00:00Z ERROR request 0 failed\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("security-logs")).unwrap();
    std::fs::write(
        dir.join("security-logs/auth.log"),
        "2026-11-22T09:00:00Z WARN login failed for ana from 10.20.0.1\n",
    )
    .unwrap();
    vec![
        ("RECORDS_DB".into(), db.display().to_string()),
        ("APP_LOG_DIR".into(), dir.join("logs").display().to_string()),
        (
            "SECURITY_LOG_DIR".into(),
            dir.join("security-logs").display().to_string(),
        ),
    ]
}

/// A client of `bulkhead connect` (the desktop clients' entry) over its stdio.
struct Connected {
    client: rmcp::service::RunningService<rmcp::RoleClient, ()>,
    _child: tokio::process::Child,
}

async fn connect_bridge(urls: &[(&str, String)], token: &str) -> Connected {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_bulkhead"));
    cmd.args(["connect", "template"]);
    for (flag, url) in urls {
        cmd.arg(flag).arg(url);
    }
    let mut child = cmd
        .env("BULKHEAD_TOKEN", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = ().serve((stdout, stdin)).await.expect("bulkhead connect");
    Connected {
        client,
        _child: child,
    }
}

async fn call(c: &Connected, tool: &str, args: Value) -> (bool, String) {
    let mut p = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(m) = args {
        p = p.with_arguments(m);
    }
    let r = tokio::time::timeout(Duration::from_secs(30), c.client.call_tool(p))
        .await
        .expect("an answer within 30 s")
        .unwrap();
    let text = r
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<String>();
    (r.is_error.unwrap_or(false), text)
}

#[test]
fn the_example_deployment_runs_as_reviewed_under_up() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let outside_ip = format!("10.{SUBNET}.0.200");
    tls::test_ca(&certs, &format!("IP:{outside_ip}"));
    let allowed = format!("{outside_ip}:8443");
    let other = format!("{outside_ip}:8444");
    let mut env = seed(dir.path());
    env.extend([
        ("WEBHOOK_URL".to_string(), format!("https://{allowed}")),
        // The stand-in "outside" is a private address: opened for the webhook connector only.
        (
            "WEBHOOK_REACH_PRIVATE".to_string(),
            format!("{outside_ip}/32"),
        ),
        (
            "WEBHOOK_CA_FILE".to_string(),
            certs.join("ca.pem").display().to_string(),
        ),
        (
            "BULKHEAD_STATE_DIR".to_string(),
            dir.path().join("state").display().to_string(),
        ),
        (
            "BULKHEAD_WORKSPACES".to_string(),
            dir.path().join("ws").display().to_string(),
        ),
        ("BULKHEAD_SELFCHECK_SECS".to_string(), "1".to_string()),
    ]);
    let opts = UpOptions {
        config: Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml")),
        subnet: SUBNET,
        prefix: "bt".into(),
        proxied_egress: Some(vec![allowed.clone()]),
        env,
        ..UpOptions::new(env!("CARGO_BIN_EXE_bulkhead").into())
    };
    let running = up(example(), &opts).expect("up (needs root, ip, nft and squid)");
    assert_eq!(
        running.instances.iter().map(|i| i.mode).collect::<Vec<_>>(),
        [NetworkMode::Full, NetworkMode::Proxied, NetworkMode::None]
    );
    let proxy = running.proxies[0].addr.to_string();

    // The outside: two HTTPS stand-ins in their own namespace on the egress bridge.
    let out_ns = Netns::create("bt-out").unwrap();
    let link = HostLink::veth(
        "bt-out",
        "bt-outc",
        &out_ns,
        "",
        &format!("{outside_ip}/24"),
    )
    .unwrap();
    link.attach(&HostLink::existing(&running.bridge)).unwrap();
    let prefix = ["ip", "netns", "exec", "bt-out"];
    let _a = tls::https_stand_in(&prefix, &outside_ip, 8443, &certs);
    let _b = tls::https_stand_in(&prefix, &outside_ip, 8444, &certs);

    // The network, seen from each namespace.
    assert!(
        connects_from(None, &allowed),
        "the host network reaches out"
    );
    assert!(
        connects_from(Some("bt-0p"), &proxy),
        "proxied reaches its proxy"
    );
    assert!(
        !connects_from(Some("bt-0p"), &allowed),
        "proxied cannot go around its proxy, even to an allowlisted address"
    );
    assert_eq!(
        connect_via("bt-0p", &proxy, &allowed),
        "HTTP/1.1 200 Connection established",
        "the proxy tunnels to the allowlisted stand-in"
    );
    assert!(
        connect_via("bt-0p", &proxy, &other).starts_with("HTTP/1.1 403"),
        "the proxy refuses anything else"
    );
    assert!(
        connect_via("bt-0p", &proxy, "169.254.169.254:80").starts_with("HTTP/1.1 403"),
        "and the metadata address"
    );
    for target in [
        allowed.as_str(),
        other.as_str(),
        proxy.as_str(),
        "10.241.10.1:22",
    ] {
        assert!(
            !connects_from(Some("bt-0n"), target),
            "none reaches {target}"
        );
    }
    // Every instance passes its own check.
    for i in &running.instances {
        assert_eq!(
            healthz(&i.url),
            (200, format!("ok {}\n", i.mode.as_str())),
            "{}",
            i.url
        );
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let urls: Vec<(&str, String)> = running
            .instances
            .iter()
            .map(|i| {
                let flag = match i.mode {
                    NetworkMode::Full => "--url",
                    NetworkMode::Proxied => "--url-proxied",
                    NetworkMode::None => "--url-isolated",
                };
                (flag, i.url.clone())
            })
            .collect();

        // The proxied instance's own egress: the webhook through the proxy, CA from ca_file.
        {
            let token = dev_token("nick", "iso-proxied");
            let t = rmcp::transport::StreamableHttpClientTransport::from_config(
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    running.instance("template", NetworkMode::Proxied).unwrap().url.clone(),
                )
                .auth_header(token),
            );
            let c = ().serve(t).await.unwrap();
            let r = c
                .call_tool(
                    CallToolRequestParams::new("notify_team").with_arguments(
                        json!({"channel": "ops", "message": "via proxy"})
                            .as_object()
                            .unwrap()
                            .clone(),
                    ),
                )
                .await
                .unwrap();
            let text: String = r.content.iter().filter_map(|b| b.as_text().map(|t| t.text.clone())).collect();
            assert!(!r.is_error.unwrap_or(false) && text.contains("\"delivered\":true"), "{text}");
            let _ = c.cancel().await;
            let log_file = running.proxies[0].dir.join("access.log");
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let log = std::fs::read_to_string(&log_file).unwrap_or_default();
                if log.contains(&format!("CONNECT {allowed}")) {
                    break;
                }
                assert!(Instant::now() < deadline, "squid logged no tunnel: {log}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }

        // `run_python` through the official Python SDK on each instance: the jail runs, writes
        // the session's workspace, and has no network on any instance (the proxy is reachable
        // from the proxied instance itself, never from its jails).
        let python = super::python_sdk::venv_python();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/sandbox_client.py");
        let (phost, pport) = proxy.split_once(':').unwrap();
        let code = format!(
            "import json, os, socket\nr = {{}}\ntry:\n    socket.create_connection(('{phost}', {pport}), timeout=3).close()\n    r['net'] = 'reached'\nexcept OSError as e:\n    r['net'] = e.errno\nopen('sdk.txt', 'w').write('sdk')\nr['files'] = sorted(os.listdir('.'))\nprint(json.dumps(r))"
        );
        for i in &running.instances {
            let out = tokio::process::Command::new(&python)
                .arg(&script)
                .arg(&i.url)
                .arg(dev_token("sam", &format!("sdk-{}", i.mode.as_str())))
                .arg(&code)
                .output()
                .await
                .unwrap();
            assert!(out.status.success(), "{}: {}", i.mode.as_str(), String::from_utf8_lossy(&out.stderr));
            let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(seen["is_error"], false, "{}: {seen}", i.mode.as_str());
            let ran: Value = serde_json::from_str(seen["text"].as_str().unwrap()).unwrap();
            let said: Value = serde_json::from_str(ran["stdout"].as_str().unwrap()).unwrap();
            assert_eq!(said["files"], json!(["sdk.txt"]), "{}: {said}", i.mode.as_str());
            assert_ne!(said["net"], "reached", "{}: {said}", i.mode.as_str());
        }

        // One session through `bulkhead connect`, as a desktop client: every tool succeeds on
        // the instance it is routed to, and the session only moves up.
        let c = connect_bridge(&urls, &dev_token("alice", "iso-walk")).await;
        let tools = c.client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), 9, "{tools:?}");
        let ok = |(is_error, text): (bool, String), what: &str| {
            assert!(!is_error, "{what}: {text}");
            text
        };
        ok(call(&c, "write_file", json!({"path": "/workspace/plan.txt", "content": "written on full"})).await, "write_file");
        assert_eq!(ok(call(&c, "read_file", json!({"path": "/workspace/plan.txt"})).await, "read_file"), "written on full");
        assert!(ok(call(&c, "search_logs", json!({"pattern": "ERROR"})).await, "search_logs").contains("request 0 failed"));
        assert!(ok(call(&c, "notify_team", json!({"channel": "ops", "message": "hi"})).await, "notify_team").contains("delivered"));
        // Confidential: the proxied instance, reading the real database.
        let rows = ok(call(&c, "search_records", json!({"query": "Acme"})).await, "search_records");
        assert!(rows.contains("Acme renewal #100"), "{rows}");
        assert_eq!(
            ok(call(&c, "read_file", json!({"path": "/workspace/plan.txt"})).await, "read_file up"),
            "written on full",
            "the session keeps its files after moving up"
        );
        ok(call(&c, "load_sensitive_dataset", json!({"dataset_name": "customers_2026"})).await, "load");
        let (is_error, text) = call(&c, "notify_team", json!({"channel": "ops", "message": "leak"})).await;
        assert!(is_error && text.starts_with("[FATAL] "), "connect is refused now: {text}");
        // Secret: the isolated instance, reading the real security log.
        let hits = ok(call(&c, "search_security_logs", json!({"pattern": "login failed"})).await, "secret");
        assert!(hits.contains("login failed for ana"), "{hits}");
        ok(call(&c, "write_file", json!({"path": "/workspace/found.txt", "content": "isolated"})).await, "write up");
        // The sandbox on the isolated instance: the files written on full are there (copied up).
        let ran = ok(call(&c, "run_python", json!({"code": "print(open('plan.txt').read(), open('found.txt').read())"})).await, "run_python isolated");
        assert!(ran.contains("written on full isolated"), "{ran}");
        assert_eq!(ok(call(&c, "read_file", json!({"path": "/workspace/plan.txt"})).await, "read"), "written on full");
        let _ = c.client.cancel().await;

        // On disk: each instance wrote its own layer; nothing isolated reached the full one.
        let ws = dir.path().join("ws");
        assert!(ws.join("template/alice/iso-walk/plan.txt").exists());
        assert!(ws.join("template.none/alice/iso-walk/found.txt").exists());
        assert!(!ws.join("template/alice/iso-walk/found.txt").exists());

        // And in each instance's own mount namespace, as the kernel enforces it: the full
        // instance cannot see what the isolated one wrote; the proxied one cannot change the
        // full one's files.
        let in_ns = |mode: NetworkMode, args: &[&str]| {
            let pid = running.instance("template", mode).unwrap().pid.to_string();
            Command::new("nsenter")
                .args(["-t", &pid, "-m", "--"])
                .args(args)
                .output()
                .unwrap()
        };
        let found = ws.join("template.none/alice/iso-walk/found.txt");
        let plan = ws.join("template/alice/iso-walk/plan.txt");
        let seen = in_ns(NetworkMode::Full, &["cat", found.to_str().unwrap()]);
        assert!(!seen.status.success(), "the full instance sees the isolated layer");
        let seen = in_ns(NetworkMode::Proxied, &["cat", found.to_str().unwrap()]);
        assert!(!seen.status.success(), "the proxied instance sees the isolated layer");
        let read = in_ns(NetworkMode::None, &["cat", plan.to_str().unwrap()]);
        assert_eq!(String::from_utf8_lossy(&read.stdout), "written on full");
        let write = in_ns(NetworkMode::Proxied, &["sh", "-c", &format!("echo x >> '{}'", plan.display())]);
        assert!(
            !write.status.success() && String::from_utf8_lossy(&write.stderr).contains("Read-only"),
            "{}",
            String::from_utf8_lossy(&write.stderr)
        );
    });

    // A route out appears in the none namespace: the instance notices within its recheck
    // (1 s here) and stops serving; it serves again once the route is gone.
    let none_url = running
        .instance("template", NetworkMode::None)
        .unwrap()
        .url
        .clone();
    Command::new("ip")
        .args([
            "-n",
            "bt-0n",
            "route",
            "add",
            "default",
            "via",
            "10.241.10.1",
        ])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let broken = loop {
        let (status, body) = healthz(&none_url);
        if status == 503 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "still healthy with a default route"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(broken.contains("default route"), "{broken}");
    Command::new("ip")
        .args(["-n", "bt-0n", "route", "del", "default"])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while healthz(&none_url).0 != 200 {
        assert!(Instant::now() < deadline, "did not recover");
        std::thread::sleep(Duration::from_millis(200));
    }

    drop(link);
    drop(out_ns);
    drop(running);
    let left = String::from_utf8(
        Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        !left.contains("bt-0"),
        "namespaces removed on teardown: {left}"
    );
}

/// `bulkhead serve template --mode <mode> --listen <listen>` inside the namespace `ns`, with
/// the example's configuration and its state under `dir`.
fn serve_in(ns: &str, mode: &str, listen: &str, dir: &std::path::Path) -> Command {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml");
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns])
        .arg(env!("CARGO_BIN_EXE_bulkhead"))
        .arg("--config")
        .arg(&config)
        .args(["serve", "template", "--mode", mode, "--listen", listen])
        .env("BULKHEAD_STATE_DIR", dir.join("state"))
        .env("BULKHEAD_WORKSPACES", dir.join("ws"))
        .stdin(Stdio::null());
    c
}

/// `--mode none` and `--mode proxied` on a network with a route out refuse to serve, naming the
/// route; `--unisolated` is the explicit development escape.
#[test]
fn an_instance_on_a_network_with_a_route_out_refuses_to_serve() {
    let ns = Netns::create("bt-hostlike").unwrap();
    let _link = HostLink::veth("bt-hl", "bt-hlc", &ns, "10.242.0.1/30", "10.242.0.2/30").unwrap();
    ns.ip(&["route", "add", "default", "via", "10.242.0.1"])
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for mode in ["none", "proxied"] {
        let out = serve_in("bt-hostlike", mode, "10.242.0.2:8123", dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{mode}: served anyway: {stderr}");
        assert!(
            stderr.contains("refusing to serve") && stderr.contains("default route"),
            "{mode}: {stderr}"
        );
    }
}

/// A name lookup is a way out: an isolated instance whose namespace has no route at all but
/// reaches a name server (here one on its own loopback, named by the namespace's
/// `resolv.conf`, which `ip netns exec` puts in place) refuses to serve, naming it; the same
/// namespace without the name server passes the check.
#[test]
fn an_isolated_instance_that_reaches_a_name_server_refuses_to_serve() {
    let name = "bt-resolver";
    let ns = Netns::create(name).unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let etc = std::path::PathBuf::from(format!("/etc/netns/{name}"));
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("resolv.conf"), "nameserver 127.0.0.1\n").unwrap();
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _etc = Gone(etc);
    let dir = tempfile::tempdir().unwrap();
    let serve = |mode: &str| {
        serve_in(name, mode, "127.0.0.1:8124", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // A process killed when the test ends, however it ends.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Waits (bounded) for the instance to exit; its stderr, or `None` while it still runs.
    let exited = |child: &mut Running, wait: u64| -> Option<(bool, String)> {
        let deadline = Instant::now() + Duration::from_secs(wait);
        loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read as _;
                let mut pipe = child.0.stderr.take().unwrap();
                pipe.read_to_string(&mut err).unwrap();
                return Some((status.success(), err));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The name server: any query gets its bytes back.
    let mut dns = Running(
        Command::new("ip")
            .args(["netns", "exec", name, "python3", "-c"])
            .arg("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('127.0.0.1', 53))\nprint('ready', flush=True)\nwhile True:\n    b, a = s.recvfrom(512)\n    s.sendto(b, a)\n")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    {
        use std::io::BufRead as _;
        let mut line = String::new();
        std::io::BufReader::new(dns.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
    }
    for mode in ["none", "proxied"] {
        let mut child = Running(serve(mode));
        let (served, stderr) = exited(&mut child, 120)
            .unwrap_or_else(|| panic!("{mode}: still serving with a name server in reach"));
        assert!(!served, "{mode}: {stderr}");
        assert!(
            stderr.contains("refusing to serve") && stderr.contains("name server 127.0.0.1:53"),
            "{mode}: {stderr}"
        );
    }
    drop(dns);
    // Without it the check passes: the instance answers `/healthz` (polled, bounded).
    let mut child = Running(serve("none"));
    let probe = "import urllib.request, time\nfor _ in range(600):\n    try:\n        print(urllib.request.urlopen('http://127.0.0.1:8124/healthz', timeout=5).status)\n        break\n    except Exception:\n        time.sleep(0.2)\n";
    let (_, status) = python_in(Some(name), probe);
    if let Some((_, stderr)) = exited(&mut child, 0) {
        panic!("the instance without a name server stopped: {stderr}");
    }
    assert_eq!(
        status, "200",
        "`/healthz` of the instance without a name server"
    );
}

/// An upstream MCP server nobody here wrote under `bulkhead up`: each instance of `third_party`
/// launches `mcp-server-time` (pinned, from PyPI) in a jail inside its own namespaces; the
/// public tool answers on `full`, the confidential one on `proxied` (in the namespace whose
/// egress nftables filters), and the session's level moves up with it.
#[test]
fn an_upstream_runs_inside_each_instance_under_up() {
    let bin = super::upstream::mcp_server_time();
    let dir = tempfile::tempdir().unwrap();
    let running = third_party_up(dir.path(), 8120, 242, "bu", &bin);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let meeting =
            json!({"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"});
        for (mode, tool, args, expect) in [
            (
                NetworkMode::Full,
                "current_time",
                json!({"timezone": "Europe/Paris"}),
                "Europe/Paris",
            ),
            (
                NetworkMode::Proxied,
                "convert_meeting_time",
                meeting,
                "18:30",
            ),
        ] {
            let url = &running.instance("third_party", mode).unwrap().url;
            let (is_error, text) = http_call(url, "ana", tool, args).await;
            assert!(
                !is_error && text.contains(expect),
                "{mode:?} {tool}: {text}"
            );
        }
    });
}

/// A rug-pulled upstream under `bulkhead up`: a build of `mcp-server-time` that lists exactly the
/// pinned definitions (so no pin catches it) but, on any call, connects where its argument says
/// (`tests/fixtures/upstream/misbehaving.py impostor`). Its connector declares no `egress`, so
/// from neither instance does anything get through, though the `full` instance itself reaches a
/// listener outside on the egress bridge: its jail has a network namespace of its own with only
/// loopback. The listener saw nothing.
#[test]
fn a_rug_pulled_upstream_reaches_nothing_from_any_instance() {
    let dir = tempfile::tempdir().unwrap();
    // The impostor's install folder, a virtualenv like the real one's: its launcher, the
    // fixture and the pinned definitions (the jail shows an upstream its install folder only).
    let fake = dir.path().join("impostor");
    std::fs::create_dir_all(fake.join("bin")).unwrap();
    std::fs::write(fake.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        root.join("tests/fixtures/upstream/misbehaving.py"),
        fake.join("misbehaving.py"),
    )
    .unwrap();
    std::fs::copy(
        root.join("specs/connectors/clock.lock.json"),
        fake.join("lock.json"),
    )
    .unwrap();
    let launcher = fake.join("bin/mcp-server-time");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\nexec /usr/bin/python3 {dir}/misbehaving.py impostor {dir}/lock.json\n",
            dir = fake.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();

    let running = third_party_up(dir.path(), 8130, 243, "bv", &launcher);

    // A listener outside, on the egress bridge, counting what reaches it.
    let outside_ip = "10.243.0.200";
    let out_ns = Netns::create("bv-out").unwrap();
    let link = HostLink::veth(
        "bv-out",
        "bv-outc",
        &out_ns,
        "",
        &format!("{outside_ip}/24"),
    )
    .unwrap();
    link.attach(&HostLink::existing(&running.bridge)).unwrap();
    let count = dir.path().join("accepted");
    let listener = Command::new("ip")
        .args(["netns", "exec", "bv-out", "python3", "-c"])
        .arg(format!(
            "import socket\ns = socket.create_server(('{outside_ip}', 9443))\nopen('{c}.ready', 'w').close()\nn = 0\nwhile True:\n    s.accept()[0].close()\n    n += 1\n    open('{c}', 'w').write(str(n))",
            c = count.display()
        ))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _listener = Kill(listener);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.path().join("accepted.ready").exists() {
        assert!(
            Instant::now() < deadline,
            "the outside listener did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let accepted = || {
        std::fs::read_to_string(&count)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let order = format!("connect {outside_ip} 9443");
    rt.block_on(async {
        for (mode, tool, args, reaches) in [
            (
                NetworkMode::Full,
                "current_time",
                json!({"timezone": order}),
                false,
            ),
            (
                NetworkMode::Proxied,
                "convert_meeting_time",
                json!({"source_timezone": order, "time": "09:30", "target_timezone": "UTC"}),
                false,
            ),
        ] {
            let before = accepted();
            let url = &running.instance("third_party", mode).unwrap().url;
            let (_, text) = http_call(url, "mallory", tool, args).await;
            assert_eq!(text.starts_with("connected"), reaches, "{mode:?}: {text}");
            if reaches {
                // Bounded wait for the listener to count it.
                let deadline = Instant::now() + Duration::from_secs(10);
                while accepted() == before {
                    assert!(Instant::now() < deadline, "the listener counted nothing");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } else {
                assert!(text.starts_with("refused"), "{mode:?}: {text}");
                assert_eq!(accepted(), before, "{mode:?} reached the outside");
            }
        }
    });
    drop(link);
}

/// `bulkhead up` gives each proxy the jail connectors of its server with their own `egress`
/// (as the instances' environment expands it), so squid holds a gate's labelled requests to
/// its connector's list, as compose and Kubernetes do.
#[test]
fn up_gives_each_proxy_its_jail_connectors_own_egress() {
    let project = &bulkhead_example::servers::PROJECT;
    let dep = project.deployment("local").unwrap();
    let got = bulkhead::isolation::up::jail_egress_of(project, dep, &|_| None);
    let fetch: Vec<String> = got
        .iter()
        .filter(|(s, c, _)| s == "third_party" && c == "fetch")
        .flat_map(|(_, _, e)| e.iter().map(|h| h.to_string()))
        .collect();
    assert_eq!(fetch, ["docs.example.com:443"], "{got:?}");
    let set = bulkhead::isolation::up::jail_egress_of(project, dep, &|k: &str| {
        (k == "FETCH_EGRESS").then(|| "wiki.example.org:443".to_string())
    });
    assert!(
        set.iter()
            .any(|(_, c, e)| c == "fetch" && e[0].to_string() == "wiki.example.org:443"),
        "{set:?}"
    );
}
