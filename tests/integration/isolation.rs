//! Real network namespaces (run as root, in CI too): an "outside" HTTP server in its own namespace
//! on the egress bridge; the full instance reaches it, the proxied one only on its allowlist, the
//! none one not at all. Connections are attempted from inside each instance's own namespace.

use bulkhead::codegen::{DeployedServerDef, DeploymentDef, Sensitivity};
use bulkhead::isolation::netns::{HostLink, Netns};
use bulkhead::isolation::up::{UpOptions, up};
use bulkhead::policy::NetworkMode;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

static SECRET_DEPLOYMENT: DeploymentDef = DeploymentDef {
    name: "isolation_test",
    servers: &[DeployedServerDef {
        name: "template",
        port: 8100,
        egress: &[],
        proxied_egress: &[],
        max_sensitivity: Sensitivity::Secret,
    }],
};

struct Outside {
    servers: Vec<Child>,
    _link: HostLink,
    ns: Netns,
}

impl Drop for Outside {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

/// Two HTTP servers (ports 8080 and 8081) on 10.<subnet>.0.200 in their own namespace on `bridge`.
fn outside(subnet: u8, bridge: &HostLink) -> Outside {
    let ns = Netns::create("bt-out").unwrap();
    let link = HostLink::veth(
        "bt-out",
        "bt-outc",
        &ns,
        "",
        &format!("10.{subnet}.0.200/24"),
    )
    .unwrap();
    link.attach(bridge).unwrap();
    let servers = [8080, 8081]
        .into_iter()
        .map(|port| {
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    "bt-out",
                    "python3",
                    "-m",
                    "http.server",
                    &port.to_string(),
                    "--bind",
                    &format!("10.{subnet}.0.200"),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    Outside {
        servers,
        _link: link,
        ns,
    }
}

/// Tries a TCP connection from inside `ns` (None: the host namespace) with a 2 s timeout.
fn connects_from(ns: Option<&str>, addr: &str) -> bool {
    let (host, port) = addr.split_once(':').unwrap();
    let code = format!(
        "import socket,sys\ntry:\n socket.create_connection(('{host}',{port}),timeout=2).close()\nexcept Exception as e:\n sys.exit(1)\n"
    );
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "python3", "-c", &code]);
            c
        }
        None => {
            let mut c = Command::new("python3");
            c.args(["-c", &code]);
            c
        }
    };
    cmd.status().unwrap().success()
}

#[test]
fn full_reaches_out_proxied_only_its_allowlist_none_nothing() {
    let subnet = 241;
    let dir = tempfile::tempdir().unwrap();
    let allowed = format!("10.{subnet}.0.200:8080");
    let other = format!("10.{subnet}.0.200:8081");
    let opts = UpOptions {
        exe: env!("CARGO_BIN_EXE_bulkhead").into(),
        config: Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml")),
        subnet,
        prefix: "bt".into(),
        proxied_egress: Some(vec![allowed.clone()]),
        env: vec![
            (
                "WEBHOOK_URL".into(),
                format!("http://10.{subnet}.0.200:8080"),
            ),
            (
                "BULKHEAD_STATE_DIR".into(),
                dir.path().join("state").display().to_string(),
            ),
            (
                "BULKHEAD_WORKSPACES".into(),
                dir.path().join("ws").display().to_string(),
            ),
        ],
    };
    let running = up(&SECRET_DEPLOYMENT, &opts).expect("up (needs root)");
    assert_eq!(
        running.instances.iter().map(|i| i.mode).collect::<Vec<_>>(),
        [NetworkMode::Full, NetworkMode::Proxied, NetworkMode::None]
    );
    let bridge = bulkhead_bridge(&running.bridge);
    let out = outside(subnet, &bridge);
    let _ = &out.ns;

    assert!(
        connects_from(None, &allowed),
        "the full instance's network reaches the outside server"
    );
    assert!(
        connects_from(None, &other),
        "the full instance's network reaches any outside port"
    );
    assert!(
        connects_from(Some("bt-0p"), &allowed),
        "the proxied namespace reaches its allowlisted address"
    );
    assert!(
        !connects_from(Some("bt-0p"), &other),
        "the proxied namespace is blocked from anything else"
    );
    assert!(
        !connects_from(Some("bt-0n"), &allowed),
        "the none namespace reaches nothing"
    );
    assert!(
        !connects_from(Some("bt-0n"), &format!("10.{subnet}.10.1:22")),
        "not even the host end of its own link"
    );

    // The same through the instances themselves: `notify_team` (an http connector tool) posts to
    // the outside server. A fresh session is public, so policy allows it; only the kernel decides.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let token = dev_token("nick", "iso-1");
    for (mode, reaches) in [
        (NetworkMode::Full, true),
        (NetworkMode::Proxied, true),
        (NetworkMode::None, false),
    ] {
        let url = running.instance("template", mode).unwrap().url.clone();
        let (is_error, text) = rt.block_on(notify(&url, &token));
        // python's http.server answers POST with 501: reaching it shows as an HTTP status.
        let reached = text.contains("501");
        assert_eq!(reached, reaches, "{mode:?} instance: {text}");
        assert!(is_error, "{mode:?}: {text}");
        if !reaches {
            assert!(
                text.starts_with("[FATAL] "),
                "a blocked call is fatal: {text}"
            );
        }
    }

    // Every instance still answers its clients over its link.
    for i in &running.instances {
        let health = i.url.replace("/mcp", "/healthz");
        let body = reqwest::blocking_get(&health);
        assert_eq!(body, format!("ok {}\n", i.mode.as_str()), "{health}");
    }
    drop(out);
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
        ttl_secs: 300,
    };
    bulkhead::auth::mint::mint_hs256(secret.as_bytes(), &claims).unwrap()
}

async fn notify(url: &str, token: &str) -> (bool, String) {
    use rmcp::ServiceExt;
    let t = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.to_string(),
        )
        .auth_header(token.to_string()),
    );
    let c = ().serve(t).await.expect("connect to instance");
    let args = serde_json::json!({"channel": "ops", "message": "hello"});
    let r = c
        .call_tool(
            rmcp::model::CallToolRequestParams::new("notify_team")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let text = r
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<String>();
    let _ = c.cancel().await;
    (r.is_error.unwrap_or(false), text)
}

/// A non-owning handle to the bridge `up` made (the `Running` owns and removes it).
fn bulkhead_bridge(name: &str) -> HostLink {
    HostLink::existing(name)
}

mod reqwest {
    /// A tiny blocking GET (no extra client crate in sync tests).
    pub fn blocking_get(url: &str) -> String {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("http://").unwrap();
        let (hostport, path) = rest
            .split_once('/')
            .map(|(h, p)| (h, format!("/{p}")))
            .unwrap();
        let mut s = std::net::TcpStream::connect(hostport).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            hostport.split(':').next().unwrap()
        )
        .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).unwrap();
        buf.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
    }
}
