//! The PostgreSQL store over TLS against a real server with a certificate for `127.0.0.1` from
//! a CA of its own: a URL that asks for encryption is encrypted to that server (directly and
//! through a store socket's relay) or not connected at all — another CA, another name, or a
//! server (or whoever answers in its place) that declines TLS is refused.

use super::backends::pg;
use super::*;
use bulkhead::state::init::open_store;
use bulkhead::state::postgres::PgOptions;
use bulkhead::state::{InitPolicy, StoreLocation};

fn options_for(url: String, socket_dir: Option<PathBuf>) -> StoreLocation {
    StoreLocation::Postgres(PgOptions {
        url,
        socket_dir,
        pool_size: 4,
        connect_timeout: Duration::from_secs(10),
    })
}

fn try_open(loc: &StoreLocation, ws: &Path) -> Result<StateStore, StateError> {
    rt().block_on(open_store(loc, options(), ws, &[], InitPolicy::FirstStart))
}

/// Whether the store's pooled connection is encrypted, as the server sees it.
fn encrypted(store: &StateStore) -> bool {
    let StateStore::Postgres(p) = store else {
        panic!("a PostgreSQL store")
    };
    rt().block_on(async {
        let conn = p.pool().get().await.unwrap();
        let row = conn
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, bool>(0)
    })
}

/// `url` with `?`/`&` and `query` appended.
fn with(url: &str, query: &str) -> String {
    format!("{url}{}{query}", if url.contains('?') { '&' } else { '?' })
}

/// Opens the store at `url` with `sslmode=<mode>&sslrootcert=<ca>`, directly or through the
/// socket folder `socket`.
fn open_tls(
    url: &str,
    mode: &str,
    ca: &Path,
    socket: Option<PathBuf>,
    ws: &Path,
) -> Result<StateStore, StateError> {
    let query = format!("sslmode={mode}&sslrootcert={}", ca.display());
    try_open(&options_for(with(url, &query), socket), ws)
}

#[test]
fn a_store_that_asks_for_tls_is_encrypted_to_the_server_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ca = &pg::server().ca;
    let url = pg::database("tls");
    let store = open_tls(&url, "verify-full", ca, None, &ws).unwrap();
    assert!(encrypted(&store), "verify-full connected in clear");
    let who = id("ana", "s1");
    assert_eq!(
        raise(&store, &who, "payroll", Sensitivity::Confidential),
        Sensitivity::Confidential
    );
    // `require` verifies as much (libpq's would take any certificate).
    let store = open_tls(&url, "require", ca, None, &ws).unwrap();
    assert!(encrypted(&store));
    // Without `sslmode`: clear text, as before.
    let store = try_open(&options_for(url, None), &ws).unwrap();
    assert!(!encrypted(&store));
}

#[test]
fn another_ca_another_name_or_a_server_without_tls_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let url = pg::database("tls_refused");
    // A CA that did not sign the server's certificate (the system's roots did not either).
    let other = dir.path().join("other-ca.pem");
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args([
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=other",
        ])
        .args(["-days", "1", "-keyout"])
        .arg(dir.path().join("other.key"))
        .arg("-out")
        .arg(&other)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    // Every encrypting mode verifies the chain and the name (libpq's `require` checks neither,
    // its `verify-ca` not the name).
    let ca = &pg::server().ca;
    let by_name = url.replace("127.0.0.1", "localhost");
    for mode in ["verify-full", "verify-ca", "require"] {
        let text = open_tls(&url, mode, &other, None, &ws)
            .unwrap_err()
            .to_string();
        assert!(text.contains("certificate"), "{mode}, another CA: {text}");
        // The right CA, but a name the certificate does not carry (it names 127.0.0.1 only).
        let text = open_tls(&by_name, mode, ca, None, &ws)
            .unwrap_err()
            .to_string();
        assert!(text.contains("certificate"), "{mode}, another name: {text}");
    }
    let refused = try_open(&options_for(with(&url, "sslmode=verify-full"), None), &ws);
    let text = refused.unwrap_err().to_string();
    assert!(text.contains("certificate"), "the system's roots: {text}");
    // Whoever answers in the server's place and says it has no TLS (`N` to the TLS request).
    let decliner = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = decliner.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        for mut conn in decliner.incoming().flatten().take(8) {
            let mut request = [0u8; 8];
            if conn.read_exact(&mut request).is_ok() {
                let _ = conn.write_all(b"N");
            }
        }
    });
    let decliner_url = format!("postgres://bulkhead@127.0.0.1:{port}/x");
    let refused = open_tls(&decliner_url, "verify-full", ca, None, &ws).unwrap_err();
    assert!(refused.to_string().contains("TLS"), "{refused}");
    // Modes that would fall back to clear text are refused before any connection.
    let refused = try_open(&options_for(with(&url, "sslmode=prefer"), None), &ws).unwrap_err();
    assert!(
        refused.to_string().contains("falls back to clear text"),
        "{refused}"
    );
}

/// Through a store socket (the relay of a pod without a network) the TLS session runs end to
/// end with the server the URL names: the relay carries bytes it cannot read.
#[test]
fn through_a_store_socket_the_session_is_encrypted_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let sockets = dir.path().join("sockets");
    std::fs::create_dir_all(&sockets).unwrap();
    let port = pg::server().port;
    let relay = {
        let _in_runtime = rt().enter();
        tokio::net::UnixListener::bind(sockets.join(".s.PGSQL.5432")).unwrap()
    };
    let _relay = rt().spawn(async move {
        while let Ok((mut inner, _)) = relay.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outer) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inner, &mut outer).await;
                }
            });
        }
    });
    let url = pg::database("tls_socket");
    let ca = &pg::server().ca;
    let store = open_tls(&url, "verify-full", ca, Some(sockets.clone()), &ws).unwrap();
    assert!(encrypted(&store), "through the socket in clear");
    // And the store works through it (the keeper connection too).
    let who = id("ben", "s1");
    assert_eq!(
        raise(&store, &who, "hr", Sensitivity::Internal),
        Sensitivity::Internal
    );
    let store = try_open(&options_for(url, Some(sockets)), &ws).unwrap();
    assert!(!encrypted(&store));
}
