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
