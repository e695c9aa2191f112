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
    Killed(
        Command::new(env!("CARGO_BIN_EXE_bulkhead"))
            .arg("relay")
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
