//! A real PostgreSQL server for the tests: Debian's `postgresql` binaries, a throwaway cluster in
//! a temporary folder, on a free loopback port, started once per test binary and killed with it
//! (parent-death signal). PostgreSQL refuses to run as root, so as root it runs as `postgres`.
//! Each test takes its own database from [`database`].

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A running test server. It takes TLS too (clients that do not ask for it connect in clear),
/// with a certificate for `127.0.0.1` only (no name) signed by a CA of its own.
pub struct PgServer {
    /// `127.0.0.1` port.
    pub port: u16,
    /// The cluster's folder (kept until the process ends).
    pub dir: PathBuf,
    /// The PEM file of the CA that signed the server's certificate.
    pub ca: PathBuf,
}

static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// The folder of Debian's PostgreSQL server binaries (`BULKHEAD_PG_BIN` overrides).
fn bin_dir() -> Result<PathBuf, String> {
    if let Ok(b) = std::env::var("BULKHEAD_PG_BIN") {
        return Ok(PathBuf::from(b));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| {
            "PostgreSQL server binaries not found (/usr/lib/postgresql): run scripts/test, which installs Debian's `postgresql`".to_string()
        })?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, b)| b)
        .ok_or_else(|| "no PostgreSQL server in /usr/lib/postgresql/*/bin".into())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The uid/gid to run as: `postgres` when we are root, ourselves otherwise.
fn run_as() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let user = nix::unistd::User::from_name("postgres")
        .ok()
        .flatten()
        .expect("running as root needs the `postgres` user (Debian's postgresql package)");
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

fn command(bin: &Path, name: &str, user: Option<(u32, u32)>, die_with_parent: bool) -> Command {
    let mut cmd = Command::new(bin.join(name));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = user {
                nix::unistd::setgroups(&[]).map_err(std::io::Error::from)?;
                nix::unistd::setgid(nix::unistd::Gid::from_raw(gid))
                    .map_err(std::io::Error::from)?;
                nix::unistd::setuid(nix::unistd::Uid::from_raw(uid))
                    .map_err(std::io::Error::from)?;
            }
            if die_with_parent {
                // Set after the credential change, which clears it.
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGQUIT)
                    .map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
    cmd
}

/// Removes the folders of servers whose test process has ended (the postmaster dies with its
/// test process, which cannot run destructors for a static; the next run cleans up instead).
fn remove_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("bulkhead-pg-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn start() -> Result<PgServer, String> {
    remove_stale();
    let bin = bin_dir()?;
    let user = run_as();
    let dir = std::env::temp_dir().join(format!(
        "bulkhead-pg-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
    }
    let data = dir.join("data");
    let out = command(&bin, "initdb", user, false)
        .args([
            "-D",
            data.to_str().unwrap(),
            "-U",
            "bulkhead",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let ca = certificates(&dir, user)?;
    let port = free_port();
    // The postmaster is spawned from a thread that never ends: the parent-death signal follows
    // the spawning thread, not the process.
    let (tx, rx) = std::sync::mpsc::channel();
    let (bin2, data2, dir2) = (bin.clone(), data.clone(), dir.clone());
    std::thread::spawn(move || {
        let child = command(&bin2, "postgres", user, true)
            .args([
                "-D",
                data2.to_str().unwrap(),
                "-p",
                &port.to_string(),
                "-k",
                dir2.to_str().unwrap(),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=300",
                "-c",
                "shared_buffers=32MB",
                "-c",
                "ssl=on",
                "-c",
                &format!("ssl_cert_file={}", dir2.join("server.crt").display()),
                "-c",
                &format!("ssl_key_file={}", dir2.join("server.key").display()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir2.join("server.log")).unwrap(),
            ))
            .spawn();
        let ok = child.is_ok();
        let _ = tx.send(child.map(|_| ()).map_err(|e| e.to_string()));
        if ok {
            loop {
                std::thread::park();
            }
        }
    });
    rx.recv().unwrap().map_err(|e| format!("postgres: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
            return Err(format!("postgres did not start: {log}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Accepting TCP comes a moment before accepting sessions.
    let url = format!("postgres://bulkhead@127.0.0.1:{port}/postgres");
    while psql(&url, "SELECT 1").is_err() {
        if Instant::now() > deadline {
            return Err("postgres accepts connections but no sessions".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(PgServer { port, dir, ca })
}

/// A CA (`ca.pem`) and the server's key and certificate for `127.0.0.1` signed by it, made by
/// `openssl` in `dir` (the key the server's user's, mode 0600); the CA's path.
fn certificates(dir: &Path, user: Option<(u32, u32)>) -> Result<PathBuf, String> {
    let ca = dir.join("ca.pem");
    let ext = dir.join("server.ext");
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1\n").map_err(|e| e.to_string())?;
    // Run in `dir` with plain file names: no path (which may hold spaces) on the command lines.
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30";
    for line in [
        format!("req -x509 {key} -subj /CN=ca -keyout ca.key -out ca.pem"),
        format!("req {key} -subj /CN=127.0.0.1 -keyout server.key -out server.csr"),
        "x509 -req -days 30 -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt -extfile server.ext".to_string(),
    ] {
        let out = Command::new("openssl")
            .args(line.split_whitespace())
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("openssl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl {line}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let key = dir.join("server.key");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    if let Some((uid, gid)) = user {
        for f in ["server.key", "server.crt"] {
            std::os::unix::fs::chown(dir.join(f), Some(uid), Some(gid))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(ca)
}

/// The shared server (started on first use; a test fails with the reason when it cannot start).
pub fn server() -> &'static PgServer {
    match SERVER.get_or_init(start) {
        Ok(s) => s,
        Err(e) => panic!("a real PostgreSQL server is needed and could not start: {e}"),
    }
}

/// Runs one statement over a fresh connection (blocking; for set-up).
pub fn psql(url: &str, sql: &str) -> Result<(), String> {
    let url = url.to_owned();
    let sql = sql.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            client.batch_execute(&sql).await.map_err(|e| e.to_string())
        })
    })
    .join()
    .unwrap()
}

/// A new, empty database on the shared server; returns its URL.
pub fn database(tag: &str) -> String {
    let s = server();
    let n = NEXT_DB.fetch_add(1, Ordering::Relaxed);
    let name = format!(
        "t_{}_{}_{n}",
        tag.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        std::process::id()
    );
    let admin = format!("postgres://bulkhead@127.0.0.1:{}/postgres", s.port);
    psql(&admin, &format!("CREATE DATABASE {name}")).expect("create database");
    format!("postgres://bulkhead@127.0.0.1:{}/{name}", s.port)
}
