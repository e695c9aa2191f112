//! TLS and egress-proxy fixtures: a test CA with a server certificate (openssl, as installed by
//! scripts/test), an HTTPS stand-in for an outside service (Python's `ssl`), and a squid egress
//! proxy running a generated policy (Debian's squid, as `bulkhead up` runs it).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Writes `ca.pem`/`ca.key` and `srv.pem`/`srv.key` (signed by the CA, for `sans`, e.g.
/// `DNS:localhost,IP:127.0.0.1`) into `dir`.
pub fn test_ca(dir: &Path, sans: &str) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(dir.join("san.ext"), format!("subjectAltName={sans}\n")).unwrap();
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=bulkhead test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=localhost",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
}

/// A child process killed on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTTPS stand-in on `host:port` (0: any) with the certificate in `tls` (see [`test_ca`]),
/// started with `prefix` before `python3` (e.g. `ip netns exec <ns>`). Returns it and its port.
pub fn https_stand_in(prefix: &[&str], host: &str, port: u16, tls: &Path) -> (Killed, u16) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/https_stand_in.py"
    );
    let port_file = tls.join(format!("port-{host}-{port}"));
    let _ = std::fs::remove_file(&port_file);
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg("python3");
            c
        }
        None => Command::new("python3"),
    };
    cmd.arg(script)
        .arg(host)
        .arg(port.to_string())
        .arg(&port_file)
        .arg(tls.join("srv.pem"))
        .arg(tls.join("srv.key"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let child = Killed(cmd.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            return (child, p.trim().parse().unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "the HTTPS stand-in did not start"
        );
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// The squid binary (Debian installs it in /usr/sbin).
pub fn squid() -> PathBuf {
    ["/usr/sbin/squid", "/usr/bin/squid"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("squid is installed (scripts/test installs Debian's squid)")
}

/// A squid on `127.0.0.1:<free port>` running `policy` (a generated policy file's text) the way
/// the proxy image does: a wrapper that sets where it listens and logs, then `include`s it.
pub struct Squid {
    /// Its listening port.
    pub port: u16,
    /// Its folder (`access.log`, `cache.log`).
    pub dir: tempfile::TempDir,
    _child: Killed,
}

impl Squid {
    pub fn start(policy: &str) -> Squid {
        let dir = tempfile::tempdir().unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        std::fs::write(dir.path().join("policy.conf"), policy).unwrap();
        let root = rustix::process::geteuid().is_root();
        std::fs::write(
            dir.path().join("squid.conf"),
            format!(
                "http_port 127.0.0.1:{port}\npid_filename none\ncache_log {d}/cache.log\naccess_log stdio:{d}/access.log\ncoredump_dir none\n{user}include {d}/policy.conf\n",
                d = dir.path().display(),
                user = if root { "cache_effective_user proxy\n" } else { "" }
            ),
        )
        .unwrap();
        if root {
            let ok = Command::new("chown")
                .args(["-R", "proxy:proxy"])
                .arg(dir.path())
                .status()
                .unwrap()
                .success();
            assert!(ok, "chown to proxy");
        }
        let service = format!("bhtest{}x{port}", std::process::id());
        let child = Killed(
            Command::new(squid())
                .args(["-N", "-d", "1", "-n", &service, "-f"])
                .arg(dir.path().join("squid.conf"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log = std::fs::read_to_string(dir.path().join("cache.log")).unwrap_or_default();
            assert!(
                Instant::now() < deadline && !log.contains("FATAL"),
                "squid did not start: {log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Squid {
            port,
            dir,
            _child: child,
        }
    }

    /// The access log so far.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// Waits up to 5 s for an access-log line matching `f` (squid writes its log lines after
    /// the reply has gone out).
    pub fn wait_log(&self, f: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.access_log().lines().any(&f) {
            assert!(
                Instant::now() < deadline,
                "no such line in squid's access log:\n{}",
                self.access_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
