//! The in-server HTTP connector (`notify_team` of the template server, connector `webhooks`) on
//! a `full` instance, where no proxy stands between it and the network: its declared host name
//! mapped to each address an SSRF guard must refuse (loopback, private, cloud metadata, CGNAT,
//! benchmarking, unique-local, NAT64), each refused by the address the name resolves to, with
//! the range named, and nothing connecting; opened only where the spec's `reach_private` says so.
//!
//! Runs on a thread in a network namespace with only loopback (every address on its `lo`, a
//! listener on all of them) and a mount namespace where `/etc/hosts` is the test's file.

use super::sandbox::{env, id, runtime_with};
use bulkhead::policy::NetworkMode;
use serde_json::json;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The non-public addresses, with what each must be refused as.
const ADDRESSES: &[(&str, &str)] = &[
    ("127.0.0.1", "loopback"),
    ("10.0.0.1", "private use"),
    ("169.254.169.254", "link local, cloud metadata"),
    ("100.64.0.1", "shared address space, CGNAT"),
    ("198.18.0.1", "benchmarking"),
    ("fd00::1", "unique local"),
    ("64:ff9b::7f00:1", "NAT64"),
    ("::7f00:1", "IPv4-compatible"),
];

fn ip(args: &[&str]) {
    let ok = std::process::Command::new("ip")
        .args(args)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ip {args:?}");
}

/// Runs `body` on a thread with a network namespace of its own and an `/etc/hosts` of `hosts`'s
/// (a file the body may rewrite in place). Needs root.
fn in_netns_with_hosts<F>(hosts: std::path::PathBuf, body: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    assert!(
        nix::unistd::geteuid().is_root(),
        "the SSRF tests make network and mount namespaces: run them as root (CI does)"
    );
    let t = std::thread::spawn(move || {
        // SAFETY: unshare on this thread only, before it holds sockets or mounts.
        let r = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWNET | nix::libc::CLONE_NEWNS) };
        assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
        let run = |args: &[&str]| {
            let ok = std::process::Command::new(args[0])
                .args(&args[1..])
                .status()
                .unwrap()
                .success();
            assert!(ok, "{args:?}");
        };
        run(&["mount", "--make-rprivate", "/"]);
        run(&["mount", "--bind", hosts.to_str().unwrap(), "/etc/hosts"]);
        ip(&["link", "set", "lo", "up"]);
        for (addr, _) in ADDRESSES {
            if *addr == "127.0.0.1" {
                continue;
            }
            let len = if addr.contains(':') { "128" } else { "32" };
            ip(&["addr", "add", &format!("{addr}/{len}"), "dev", "lo"]);
        }
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(body());
    });
    if let Err(e) = t.join() {
        std::panic::resume_unwind(e);
    }
}

/// An HTTP listener on every address of the namespace (`[::]`, dual stack): answers `200 {}`.
async fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("[::]:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                    .await;
            });
        }
    });
    (port, accepted)
}

fn map(hosts: &std::path::Path, addr: &str) {
    // In place: the bind mount shows this inode.
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(hosts)
        .unwrap();
    writeln!(f, "127.0.0.1 localhost\n{addr} hooks.example.com").unwrap();
}

#[test]
fn the_http_connector_refuses_a_name_that_resolves_to_a_non_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    map(&hosts, "127.0.0.1");
    let hosts2 = hosts.clone();
    in_netns_with_hosts(hosts, move || async move {
        let hosts = hosts2;
        let (port, accepted) = listener().await;
        let env = env();
        let url = format!("http://hooks.example.com:{port}");
        let notify = |rt: bulkhead::call::Runtime, session: &'static str| async move {
            rt.call(
                &id("ana", session),
                "notify_team",
                json!({"channel": "ops", "message": "hi"})
                    .as_object()
                    .cloned(),
            )
            .await
        };
        for (addr, what) in ADDRESSES {
            map(&hosts, addr);
            let rt = runtime_with(&env, NetworkMode::Full, &[("WEBHOOK_URL", &url)], None);
            let out = notify(rt, "s1").await;
            assert!(out.is_error, "{addr}: delivered: {}", out.text);
            assert!(
                out.text.contains(&format!("resolves to {addr}")) && out.text.contains(what),
                "{addr}: the refusal must name the address and the range ({what}): {}",
                out.text
            );
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                0,
                "{addr}: a connection was made"
            );
        }
        // An address written in the URL is judged as written.
        let literal = format!("http://169.254.169.254:{port}");
        let rt = runtime_with(&env, NetworkMode::Full, &[("WEBHOOK_URL", &literal)], None);
        let out = notify(rt, "s2").await;
        assert!(
            out.is_error && out.text.contains("cloud metadata"),
            "{}",
            out.text
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        // The spec opens a range (here through its variable): that range, and only it, is reached.
        map(&hosts, "10.0.0.1");
        let rt = runtime_with(
            &env,
            NetworkMode::Full,
            &[
                ("WEBHOOK_URL", &url),
                ("WEBHOOK_REACH_PRIVATE", "10.0.0.0/8"),
            ],
            None,
        );
        let out = notify(rt, "s3").await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        map(&hosts, "169.254.169.254");
        let rt = runtime_with(
            &env,
            NetworkMode::Full,
            &[
                ("WEBHOOK_URL", &url),
                ("WEBHOOK_REACH_PRIVATE", "10.0.0.0/8"),
            ],
            None,
        );
        let out = notify(rt, "s4").await;
        assert!(
            out.is_error && out.text.contains("cloud metadata"),
            "{}",
            out.text
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    });
}
