//! Reverse tunnels with the real binary (`bulkhead relay --tunnel-accept/--tunnel-dial`): a
//! process in a network namespace with only loopback (no route, no name server) reaches a real
//! PostgreSQL through a Unix socket, carried over tunnels that a store-side relay opens into the
//! accepting one; without the store-side relay it reaches nothing.

use bulkhead::isolation::netns::Netns;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (and reaped) when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn relay(args: &[String]) -> Killed {
    relay_as(None, args)
}

/// `bulkhead relay ARGS`, as user `uid` when given (as in the pod, where the relay and the
/// server are the image's user and share the socket folder).
fn relay_as(uid: Option<&str>, args: &[String]) -> Killed {
    let mut c = match uid {
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", u, "--regid", u, "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_bulkhead"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_bulkhead")),
    };
    Killed(
        c.arg("relay")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bulkhead relay"),
    )
}

/// `psql` run inside `ns` against the socket folder: (success, what it printed).
fn psql_in(ns: &Netns, sockets: &std::path::Path, db: &str) -> (bool, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "psql"])
        .arg(format!(
            "host={} dbname={db} user=bulkhead connect_timeout=10",
            sockets.display()
        ))
        .args(["-tAc", "SELECT 40 + 2"])
        .stdin(Stdio::null())
        .output()
        .expect("run psql");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_process_without_network_reaches_postgres_over_tunnels_that_arrive() {
    let pg = super::procs::pg::server();
    let url = super::procs::pg::database("tunnel");
    let db = url.rsplit('/').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let sockets = dir.path().join("sock");
    std::fs::create_dir(&sockets).unwrap();
    let tunnels = format!("127.0.0.1:{}", super::scaffold::free_port());
    let _accept = relay(&[
        "--tunnel-accept".into(),
        format!("unix:{}/.s.PGSQL.5432={tunnels}", sockets.display()),
        "--tunnel-idle".into(),
        "2".into(),
    ]);
    let dial = relay(&[
        "--tunnel-dial".into(),
        format!("{tunnels}=127.0.0.1:{}", pg.port),
    ]);
    let ns = Netns::create("bt-tunnel").unwrap();
    // Bounded wait for both relays and the first tunnels.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    let reached = loop {
        let (ok, text) = psql_in(&ns, &sockets, &db);
        if ok && text.trim() == "42" {
            break true;
        }
        last = text;
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(reached, "psql never answered through the tunnel: {last}");
    // Several in a row: each used tunnel is replaced by the dial side.
    for _ in 0..5 {
        let (ok, text) = psql_in(&ns, &sockets, &db);
        assert!(ok && text.trim() == "42", "{text}");
    }
    // The accepting side never dials: without the store-side relay nothing is reached (its
    // idle tunnels closed with it and are skipped).
    drop(dial);
    let (ok, text) = psql_in(&ns, &sockets, &db);
    assert!(!ok, "reached the store without a tunnel: {text}");
}

/// `GET path` over the Unix socket at `sock`: the status code, if it answered.
fn get_status(sock: &std::path::Path, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = String::new();
    s.read_to_string(&mut head).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

/// An isolated instance as a Kubernetes `none` pod runs it: the pod's server command (the
/// generated manifests' bubblewrap prefix, as the image's unprivileged user) gives `serve --mode
/// none` a network namespace with only loopback, so its isolation self-check passes (no route,
/// no name server), and its PostgreSQL store is reached through `state.store_socket` over
/// tunnels that arrive. It answers `/readyz`, which needs the store.
#[test]
fn an_isolated_instance_serves_with_its_postgres_store_over_tunnels() {
    let pg = super::procs::pg::server();
    let url = super::procs::pg::database("tunnel_serve");
    let dir = tempfile::tempdir().unwrap();
    let sockets = dir.path().join("sock");
    std::fs::create_dir(&sockets).unwrap();
    let tunnels = format!("127.0.0.1:{}", super::scaffold::free_port());
    let _dial = relay(&[
        "--tunnel-dial".into(),
        format!("{tunnels}=127.0.0.1:{}", pg.port),
    ]);
    let config = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml"),
    )
    .unwrap()
    .replace(
        "  workspaces: ${BULKHEAD_WORKSPACES:-.bulkhead/workspaces}\n",
        &format!(
            "  workspaces: ${{BULKHEAD_WORKSPACES:-.bulkhead/workspaces}}\n  store: \"{url}\"\n  store_socket: {}\n",
            sockets.display()
        ),
    );
    assert!(config.contains("store_socket"), "{config}");
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, config).unwrap();
    let serve_sock = dir.path().join("serve.sock");
    // The image's user owns what the server writes (as in the pod).
    let uid = bulkhead_codegen::emit::deploy::UID.to_string();
    let owned = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(owned.success());
    let _accept = relay_as(
        Some(&uid),
        &[
            "--tunnel-accept".into(),
            format!("unix:{}/.s.PGSQL.5432={tunnels}", sockets.display()),
        ],
    );
    // The server opens its store at start: wait (bounded) for the relay's socket first.
    let store_socket = sockets.join(".s.PGSQL.5432");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !store_socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(store_socket.exists(), "the accepting relay never listened");
    let prefix = bulkhead_codegen::emit::deploy::OWN_NETWORK;
    let (bwrap, rest) = prefix.split_first().unwrap();
    let (_, bwrap_args) = rest.split_last().unwrap();
    let _serve = Killed(
        Command::new("setpriv")
            .args(["--reuid", &uid, "--regid", &uid, "--clear-groups", bwrap])
            .args(bwrap_args)
            .arg(env!("CARGO_BIN_EXE_bulkhead"))
            .arg("--config")
            .arg(&cfg)
            .args(["serve", "template", "--mode", "none", "--listen"])
            .arg(format!("unix:{}", serve_sock.display()))
            .env("BULKHEAD_STATE_DIR", dir.path().join("state"))
            .env("BULKHEAD_WORKSPACES", dir.path().join("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("serve.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut status = None;
    while Instant::now() < deadline {
        status = get_status(&serve_sock, "/readyz");
        if status == Some(200) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        status,
        Some(200),
        "the isolated instance never became ready: {}",
        std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default()
    );
}
