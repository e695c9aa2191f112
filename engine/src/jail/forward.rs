//! The jail's end of its way out: the first program of a jail whose connector declares
//! `egress:` (`bulkhead jail-net -- PROGRAM ARGS…`).
//!
//! A jail has a network namespace of its own with only loopback (see [`super::jail`]); nothing
//! in it can reach the host's addresses or abstract sockets. This program listens on the jail's
//! own `127.0.0.1:`[`PROXY_PORT`], starts the declared program (which finds the listener in
//! `HTTP_PROXY`/`HTTPS_PROXY`) and carries each connection, unread, to the gate's Unix socket at
//! [`SOCKET`] (a file bound into the jail), where the server decides what may pass
//! ([`super::egress`]). It exits with the program's status. It holds no secret and no policy:
//! killing it (the jail's code can) only takes the jail's own way out away.
//!
//! Plain threads and `std` only: it runs before every upstream and every networked run, and
//! starts in a few milliseconds.

use std::io::Write as _;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The port of the jail's proxy on its own loopback.
pub const PROXY_PORT: u16 = 3128;
/// Where the gate's socket is inside a jail.
pub const SOCKET: &str = "/run/bulkhead/egress.sock";
/// The folder holding it, bound read-only into the jail.
pub const SOCKET_DIR: &str = "/run/bulkhead";
/// The name of the first argument that selects this program.
pub const ARG: &str = "jail-net";
/// Connections carried at once (more wait in the listen queue).
const MAX_CONNECTIONS: usize = 64;

/// Runs the forwarder with `args` (the words after `jail-net`): `-- PROGRAM ARGS…`.
/// Returns the exit code: the program's, 128 + its signal, or 127 when it cannot start.
pub fn main(args: &[String]) -> i32 {
    let argv = match args.split_first() {
        Some((dash, rest)) if dash == "--" && !rest.is_empty() => rest,
        _ => {
            eprintln!("usage: bulkhead {ARG} -- PROGRAM [ARGS...]");
            return 2;
        }
    };
    let listener = match TcpListener::bind(("127.0.0.1", PROXY_PORT)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bulkhead {ARG}: cannot listen on 127.0.0.1:{PROXY_PORT}: {e}");
            return 127;
        }
    };
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                open.fetch_sub(1, Ordering::AcqRel);
                continue; // dropped: the client sees a reset and may retry
            }
            let open = open.clone();
            std::thread::spawn(move || {
                carry(conn);
                open.fetch_sub(1, Ordering::AcqRel);
            });
        }
    });
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .status();
    match status {
        Ok(s) => s
            .code()
            .or_else(|| s.signal().map(|sig| 128 + sig))
            .unwrap_or(1),
        Err(e) => {
            eprintln!("bulkhead {ARG}: cannot start `{}`: {e}", argv[0]);
            127
        }
    }
}

/// Copies both ways between a jail connection and the gate until either side closes.
fn carry(conn: TcpStream) {
    let Ok(gate) = UnixStream::connect(SOCKET) else {
        let _ = (&conn).write_all(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    };
    let (Ok(conn2), Ok(gate2)) = (conn.try_clone(), gate.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        pump(conn2, &gate2);
        let _ = gate2.shutdown(Shutdown::Write);
    });
    pump(gate, &conn);
    let _ = conn.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// Copies `from` into `to` until `from` ends or `to` fails.
fn pump(mut from: impl std::io::Read, mut to: impl std::io::Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
