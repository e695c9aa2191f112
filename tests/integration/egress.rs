//! Outbound HTTPS from an instance, as deployed: the http connector against a local HTTPS
//! stand-in with a test CA (trusted only through `ca_file`), through a real squid running the
//! generated egress policy (allowlisted `host:port` tunnelled, anything else refused), and the
//! self-check's proxy probe against squid and against a proxy that lets everything through.

use super::procs::{Deployment, Store, call, client};
use bulkhead_codegen::emit::deploy::proxy::squid_policy;
use bulkhead_vocab::HostPort;
use serde_json::json;

use crate::tls;

fn policy(pairs: &[(&str, u16)]) -> String {
    let allowed: Vec<HostPort> = pairs
        .iter()
        .map(|(h, p)| HostPort {
            host: h.to_string(),
            port: *p,
        })
        .collect();
    squid_policy(&allowed, &[], &[])
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

/// Runs `args` inside network namespace `ns`.
fn in_ns(ns: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap()
}

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

#[test]
fn an_allowlisted_name_that_resolves_inside_is_refused_unless_its_range_is_named() {
    // In a network namespace with nothing but loopback, so no packet can leave even if the
    // policy let one through: squid answers 403 for what the policy refuses, and fails to
    // connect (503) for what it allows. Names resolve through a hosts file.
    let ns = Netns(format!("bhsq{}", std::process::id()));
    let ok = std::process::Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .unwrap()
        .success();
    assert!(ok, "ip netns add (needs root)");
    assert!(
        in_ns(&ns.0, &["ip", "link", "set", "lo", "up"])
            .status
            .success()
    );
    let names = [
        ("internal.example.com", "10.1.2.3", false),
        ("cgnat.example.com", "100.64.0.9", false),
        ("ula.example.com", "fd00:ec2::254", false),
        ("meta.example.com", "169.254.169.254", false),
        ("mapped.example.com", "::ffff:192.168.1.1", false),
        // Translation and tunnelling prefixes that embed an IPv4 address, and the other
        // special-purpose ranges the IANA registries list (the list of `vocab::ranges`).
        ("nat64.example.com", "64:ff9b::7f00:1", false),
        ("nat64local.example.com", "64:ff9b:1::a00:1", false),
        ("sixtofour.example.com", "2002:7f00:1::1", false),
        ("teredo.example.com", "2001:0:4136:e378::1", false),
        ("sitelocal.example.com", "fec0::1", false),
        ("bench.example.com", "198.18.0.7", false),
        ("doc.example.com", "192.0.2.7", false),
        ("reserved.example.com", "240.0.0.7", false),
        ("dummy.example.com", "100:0:0:1::7", false),
        ("compat.example.com", "::7f00:1", false),
        ("ietf.example.com", "2001:1::1", false),
        ("declared.example.com", "10.9.1.1", true),
        ("declaredbench.example.com", "198.19.1.1", true),
    ];
    let allowed: Vec<HostPort> = names
        .iter()
        .map(|(n, _, _)| HostPort {
            host: (*n).into(),
            port: 443,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let hosts: String = names
        .iter()
        .map(|(n, ip, _)| format!("{ip} {n}\n"))
        .collect();
    std::fs::write(dir.path().join("hosts"), hosts).unwrap();
    std::fs::write(
        dir.path().join("policy.conf"),
        squid_policy(
            &allowed,
            &["10.9.0.0/16".to_string(), "198.19.0.0/16".to_string()],
            &[],
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("squid.conf"),
        format!(
            "http_port 127.0.0.1:3128\npid_filename none\ncache_log {d}/cache.log\naccess_log stdio:{d}/access.log\ncoredump_dir none\ncache_effective_user proxy\nhosts_file {d}/hosts\ndns_nameservers 127.0.0.1\nconnect_timeout 2 seconds\ninclude {d}/policy.conf\n"
        ),
    )
    .unwrap();
    assert!(
        std::process::Command::new("chown")
            .args(["-R", "proxy:proxy", &d])
            .status()
            .unwrap()
            .success()
    );
    let squid = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(tls::squid())
        .args(["-N", "-d", "1", "-n", &ns.0, "-f"])
        .arg(dir.path().join("squid.conf"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _squid = tls::Killed(squid);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let probe = in_ns(&ns.0, &["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/3128"]);
        if probe.status.success() {
            break;
        }
        let log = std::fs::read_to_string(dir.path().join("cache.log")).unwrap_or_default();
        assert!(
            std::time::Instant::now() < deadline && !log.contains("FATAL"),
            "squid did not start in the namespace: {log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for (name, ip, allowed) in names {
        let out = in_ns(
            &ns.0,
            &[
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "--max-time",
                "10",
                "-w",
                "%{http_connect}",
                "-x",
                "http://127.0.0.1:3128",
                &format!("https://{name}/"),
            ],
        );
        let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if allowed {
            // Squid tried to connect (nothing is reachable here): allowed by the policy.
            assert!(
                code == "503" || code == "502",
                "{name} ({ip}) was refused: {code}"
            );
        } else {
            assert_eq!(code, "403", "{name} ({ip}) was not refused");
        }
    }
}
