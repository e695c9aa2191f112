//! The egress gate against the requests of a jail that tries to reach a host its connector
//! does not declare but another connector of the same instance does (so the instance's proxy
//! would carry it): a gate whose connector `fetch` declares only `docs.example.com`, in front of
//! a real squid whose policy allows `docs.example.com` and `hooks.example.com`.
//!
//! Everything runs in a network namespace of its own with only loopback; the two names resolve
//! (squid's hosts file) to stand-in addresses on that loopback, where listeners record every byte
//! they are sent. Nothing can leave the machine even while a test fails.

use super::jail_egress::in_fresh_netns;
use bulkhead::jail::egress::Egress;
use bulkhead::policy::NetworkMode;
use bulkhead_codegen::emit::deploy::proxy::{Gated, squid_policy};
use bulkhead_vocab::HostPort;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, UnixStream};

use crate::tls;

const DOCS: &str = "93.184.215.14";
const HOOKS: &str = "93.184.215.15";

/// What the listeners of one address were sent, one entry per connection.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn all(&self) -> String {
        self.0.lock().unwrap().join("\n---\n")
    }
}

/// Listens on `ip`:80 (answers every request head `200 <name>`, keeping the connection open, so
/// a proxy may send it the next one) and `ip`:443 (greets a tunnel with `tunnel to <name>`).
async fn origin(ip: &'static str, name: &'static str) -> Seen {
    let seen = Seen::default();
    for port in [80u16, 443] {
        let l = TcpListener::bind((ip, port)).await.unwrap();
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let slot = {
                        let mut all = seen.0.lock().unwrap();
                        all.push(String::new());
                        all.len() - 1
                    };
                    if port == 443 {
                        let _ = s.write_all(format!("tunnel to {name}\n").as_bytes()).await;
                    }
                    let mut buf = vec![0u8; 8192];
                    let mut pending = Vec::new();
                    while let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await
                    {
                        if n == 0 {
                            break;
                        }
                        seen.0.lock().unwrap()[slot].push_str(&String::from_utf8_lossy(&buf[..n]));
                        if port == 80 {
                            pending.extend_from_slice(&buf[..n]);
                            while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                                pending.drain(..i + 4);
                                let reply = format!(
                                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{name}",
                                    name.len()
                                );
                                if s.write_all(reply.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
    }
    seen
}

fn hp(host: &str, port: u16) -> HostPort {
    HostPort {
        host: host.into(),
        port,
    }
}

/// A squid allowing both names on 80 and 443, resolving them to the stand-ins; requests labelled
/// by `fetch`'s gate are held to `fetch`'s own list when `label` is set.
fn squid(hosts_dir: &std::path::Path, label: bool) -> tls::Squid {
    let allowed = [
        hp("docs.example.com", 80),
        hp("docs.example.com", 443),
        hp("hooks.example.com", 80),
        hp("hooks.example.com", 443),
    ];
    let own = [hp("docs.example.com", 80), hp("docs.example.com", 443)];
    let gated = [Gated {
        connector: "fetch",
        egress: &own,
    }];
    let policy = squid_policy(&allowed, &[], if label { &gated } else { &[] });
    tls::Squid::start(&format!(
        "hosts_file {}/hosts\ndns_nameservers 127.0.0.1\nconnect_timeout 2 seconds\n{policy}",
        hosts_dir.display()
    ))
}

/// Sends `bytes` to the gate in one write and returns everything it answers until it closes.
async fn send(sock: &std::path::Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(8), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn hosts_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hosts"),
        format!("{DOCS} docs.example.com\n{HOOKS} hooks.example.com\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn add_stand_ins() {
    for ip in [DOCS, HOOKS] {
        let ok = std::process::Command::new("ip")
            .args(["addr", "add", &format!("{ip}/32"), "dev", "lo"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip addr add {ip}");
    }
}

/// The requests that reached `hooks.example.com` through `fetch`'s gate with squid's
/// two-host policy (no per-connector label: the gate alone must hold): none may.
#[test]
fn a_gate_forwards_only_the_request_it_decided_on() {
    in_fresh_netns(|| async {
        add_stand_ins();
        let docs = origin(DOCS, "docs").await;
        let hooks = origin(HOOKS, "hooks").await;
        let hosts = hosts_dir();
        let squid = squid(hosts.path(), false);
        let proxy = format!("http://127.0.0.1:{}", squid.port);
        let egress = Egress::new(
            "fetch",
            &["docs.example.com:80".into(), "docs.example.com:443".into()],
            &move |k: &str| (k == "HTTPS_PROXY").then(|| proxy.clone()),
        )
        .unwrap();
        let gate = egress.gate(NetworkMode::Proxied).unwrap().unwrap();
        let sock = gate.dir().join("egress.sock");

        // What fetch may do, it does: a request and a tunnel to docs.
        let r = send(
            &sock,
            b"GET http://docs.example.com/a HTTP/1.1\r\nHost: docs.example.com\r\n\r\n",
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("docs"), "{r}");
        let r = send(&sock, b"CONNECT docs.example.com:443 HTTP/1.1\r\n\r\n").await;
        assert!(r.contains(" 200 ") && r.contains("tunnel to docs"), "{r}");

        let attacks: &[(&str, &[u8])] = &[
            (
                "pipelined GET then GET",
                b"GET http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\n\r\nGET http://hooks.example.com/leak HTTP/1.1\r\nHost: hooks.example.com\r\n\r\n",
            ),
            (
                "pipelined GET then CONNECT",
                b"GET http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\n\r\nCONNECT hooks.example.com:443 HTTP/1.1\r\nHost: hooks.example.com:443\r\n\r\n",
            ),
            (
                "CONNECT with userinfo (hooks first)",
                b"CONNECT hooks.example.com:443@docs.example.com:443 HTTP/1.1\r\n\r\n",
            ),
            (
                "CONNECT with userinfo (docs first)",
                b"CONNECT docs.example.com@hooks.example.com:443 HTTP/1.1\r\n\r\n",
            ),
            (
                "absolute GET with userinfo",
                b"GET http://docs.example.com@hooks.example.com/leak HTTP/1.1\r\nHost: hooks.example.com\r\n\r\n",
            ),
            (
                "tab after the method",
                b"GET\thttp://hooks.example.com/leak http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\n\r\n",
            ),
            (
                "tab inside the target",
                b"GET http://docs.example.com/\thttp://hooks.example.com/leak HTTP/1.1\r\nHost: docs.example.com\r\n\r\n",
            ),
            (
                "a Host that is not the target",
                b"GET http://docs.example.com/ HTTP/1.1\r\nHost: hooks.example.com\r\n\r\n",
            ),
            (
                "bare LF before a second Host",
                b"GET http://docs.example.com/ HTTP/1.1\nHost: hooks.example.com\r\n\r\n",
            ),
            (
                "a chunked body hiding a request",
                b"POST http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET http://hooks.example.com/leak HTTP/1.1\r\nHost: hooks.example.com\r\n\r\n",
            ),
            (
                "a body longer than its length",
                b"POST http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\nContent-Length: 2\r\n\r\nokGET http://hooks.example.com/leak HTTP/1.1\r\nHost: hooks.example.com\r\n\r\n",
            ),
            (
                "a non-canonical port",
                b"CONNECT hooks.example.com:0443 HTTP/1.1\r\n\r\n",
            ),
        ];
        for (what, bytes) in attacks {
            let r = send(&sock, bytes).await;
            // Give a proxy that was handed a second request the time to carry it.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(
                hooks.all().is_empty(),
                "{what}: reached hooks.example.com: {}\n(gate answered {r})",
                hooks.all()
            );
            assert!(
                !r.contains("tunnel to hooks") && !r.ends_with("hooks"),
                "{what}: {r}"
            );
        }
        // The request docs was sent is the one the gate wrote, once per connection.
        let at_docs = docs.all();
        assert!(!at_docs.contains("leak"), "{at_docs}");
        assert!(
            !at_docs.contains("Bulkhead-Connector"),
            "squid must strip the label: {at_docs}"
        );
        drop(gate);
    });
}

/// Where squid carries requests from the gate, it holds them to the connector's own list
/// (defence in depth: a request labelled `fetch` reaches docs, not hooks; an unlabelled one, the
/// server's own, still reaches both).
#[test]
fn the_proxy_holds_a_gates_requests_to_its_connectors_own_list() {
    in_fresh_netns(|| async {
        add_stand_ins();
        let _docs = origin(DOCS, "docs").await;
        let hooks = origin(HOOKS, "hooks").await;
        let hosts = hosts_dir();
        let squid = squid(hosts.path(), true);
        let ask = |req: &'static str| {
            let port = squid.port;
            async move {
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .unwrap();
                s.write_all(req.as_bytes()).await.unwrap();
                let mut out = Vec::new();
                let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
                String::from_utf8_lossy(&out).into_owned()
            }
        };
        let r = ask("GET http://docs.example.com/ HTTP/1.1\r\nHost: docs.example.com\r\nBulkhead-Connector: fetch\r\nConnection: close\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        let r = ask("GET http://hooks.example.com/ HTTP/1.1\r\nHost: hooks.example.com\r\nBulkhead-Connector: fetch\r\nConnection: close\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        let r = ask("CONNECT hooks.example.com:443 HTTP/1.1\r\nHost: hooks.example.com:443\r\nBulkhead-Connector: fetch\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        assert!(hooks.all().is_empty(), "{}", hooks.all());
        let r = ask("GET http://hooks.example.com/ HTTP/1.1\r\nHost: hooks.example.com\r\nConnection: close\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("hooks"), "{r}");
    });
}
