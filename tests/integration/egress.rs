//! Outbound HTTPS from an instance, as deployed: the http connector against a local HTTPS
//! stand-in with a test CA (trusted only through `ca_file`), through a real squid running the
//! generated egress policy (allowlisted `host:port` tunnelled, anything else refused), and the
//! self-check's proxy probe against squid and against a proxy that lets everything through.

use super::procs::{Deployment, Store, call, client};
use bulkhead_codegen::emit::deploy::{Allowed, proxy::squid_policy};
use serde_json::json;

#[path = "../support/tls.rs"]
mod tls;

fn policy(pairs: &[(&str, u16)]) -> String {
    let allowed: Vec<Allowed> = pairs
        .iter()
        .map(|(h, p)| Allowed {
            host: h.to_string(),
            port: *p,
        })
        .collect();
    squid_policy(&allowed)
}

async fn notify(d: &Deployment, session: &str) -> super::procs::Reply {
    let p = d.start("proxied", None);
    let c = client(&p.url, "nick", session).await;
    let r = call(
        &c,
        "notify_team",
        json!({"channel": "ops", "message": "hello"}),
    )
    .await
    .unwrap();
    let _ = c.cancel().await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_egress_goes_through_the_generated_policy_with_a_test_ca() {
    let certs = tempfile::tempdir().unwrap();
    tls::test_ca(certs.path(), "DNS:localhost,IP:127.0.0.1");
    let (_allowed_srv, allowed) = tls::https_stand_in(&[], "127.0.0.1", 0, certs.path());
    let (_other_srv, other) = tls::https_stand_in(&[], "127.0.0.1", 0, certs.path());
    let squid = tls::Squid::start(&policy(&[("127.0.0.1", allowed)]));
    let ca = certs.path().join("ca.pem").display().to_string();

    let mut d = Deployment::new(Store::Sqlite, "egress").await;
    d.set_env("HTTPS_PROXY", &format!("http://127.0.0.1:{}", squid.port));
    d.set_env("WEBHOOK_URL", &format!("https://127.0.0.1:{allowed}"));
    d.set_env("WEBHOOK_CA_FILE", &ca);

    // Allowlisted, trusted CA: delivered through the proxy's CONNECT tunnel.
    let r = notify(&d, "eg-1").await;
    assert!(!r.is_error, "{}", r.text);
    assert!(r.text.contains("\"delivered\":true"), "{}", r.text);
    // The call went through squid.
    squid.wait_log(|l| {
        l.contains("TCP_TUNNEL/200") && l.contains(&format!("CONNECT 127.0.0.1:{allowed}"))
    });

    // Not on the allowlist: squid refuses the tunnel and never contacts it.
    d.set_env("WEBHOOK_URL", &format!("https://127.0.0.1:{other}"));
    let r = notify(&d, "eg-2").await;
    assert!(r.is_error && r.text.starts_with("[FATAL] "), "{}", r.text);
    assert!(
        r.text
            .contains(&format!("cannot connect to 127.0.0.1:{other}"))
            && r.text.contains("tunnel"),
        "{}",
        r.text
    );
    squid.wait_log(|l| {
        l.contains("TCP_DENIED/403") && l.contains(&format!("CONNECT 127.0.0.1:{other}"))
    });

    // Allowlisted but the CA is not trusted (system roots only): TLS is verified and refused.
    d.set_env("WEBHOOK_URL", &format!("https://127.0.0.1:{allowed}"));
    d.set_env("WEBHOOK_CA_FILE", "");
    let r = notify(&d, "eg-3").await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.to_lowercase().contains("certificate") || r.text.contains("UnknownIssuer"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn the_proxy_probe_accepts_the_policy_and_flags_an_open_proxy() {
    use bulkhead::isolation::selfcheck::probe_proxy;
    let squid = tls::Squid::start(&policy(&[("hooks.example.com", 443)]));
    probe_proxy(&format!("127.0.0.1:{}", squid.port))
        .await
        .expect("the generated policy refuses the probe");
    squid.wait_log(|l| l.contains("TCP_DENIED/403") && l.contains("CONNECT 192.0.2.1:443"));

    // A proxy that tunnels anything: the probe says so.
    let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = open.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = open.accept().await {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
        }
    });
    let err = probe_proxy(&addr.to_string()).await.unwrap_err();
    assert!(err.contains("does not filter egress"), "{err}");
}
