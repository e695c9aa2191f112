//! How this process reaches a PostgreSQL server (the state store and its keeper connections,
//! the audit sink and checkpoints, `bulkhead audit`, the `postgres` connector): the URL's
//! `sslmode` and `sslrootcert` are read here, and every connection is opened from the result.
//!
//! # The invariant (enforced here)
//!
//! A connection whose URL asks for encryption (`sslmode=require`, `verify-ca` or `verify-full`)
//! is encrypted to the server the URL names, or not made: a server that declines TLS is
//! refused, and in every one of those modes the certificate chain (against `sslrootcert`, a PEM
//! file, or the system's roots) and the name (the URL's host) are verified. libpq's `require`
//! and `verify-ca` check less, and a man in the middle passes them. `disable`, or no `sslmode`,
//! is clear text. `allow` and `prefer` are refused: they fall back to clear text whenever the
//! other side says it has no TLS, which whoever sits on the path can say. Through a store socket
//! (a relay) or a proxy tunnel the TLS session still runs end to end with the named server.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// An open connection (its task runs until the client drops), or why none opened.
pub type Connected =
    Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>;

/// The socket file a PostgreSQL server (or the relay standing for it) listens on in its folder.
const SOCKET_FILE: &str = ".s.PGSQL.5432";

/// A PostgreSQL server as a URL names it: the connection settings, where to connect, and the
/// TLS the settings' `ssl_mode` uses.
#[derive(Clone)]
pub struct PgTarget {
    config: tokio_postgres::Config,
    /// A socket to connect to instead of the URL's hosts, with TLS to the URL's first host.
    socket: Option<PathBuf>,
    /// The name the server's certificate must carry (the URL's first host).
    host: String,
    tls: MakeRustlsConnect,
}

impl PgTarget {
    /// Reads `url` (`postgres://…` or `key=value` pairs), its `sslmode` and `sslrootcert`.
    pub fn parse(url: &str) -> Result<PgTarget, String> {
        let (_, mode, root) = take_tls_keys(url);
        let mut config = settings(url)?;
        let encrypt = match mode.as_deref() {
            None | Some("disable") => false,
            Some("require" | "verify-ca" | "verify-full") => true,
            Some(m @ ("allow" | "prefer")) => {
                return Err(format!(
                    "postgres url: `sslmode={m}` falls back to clear text whenever the other side says it has no TLS; use `sslmode=verify-full` (encrypted, the certificate and name verified) or `sslmode=disable`"
                ));
            }
            Some(other) => {
                return Err(format!(
                    "postgres url: unknown `sslmode={other}` (disable, require, verify-ca or verify-full)"
                ));
            }
        };
        if root.is_some() && !encrypt {
            return Err(
                "postgres url: `sslrootcert` needs an `sslmode` that encrypts (verify-full)".into(),
            );
        }
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => String::new(),
        };
        if encrypt && rustls::pki_types::ServerName::try_from(host.as_str()).is_err() {
            return Err(format!(
                "postgres url: `sslmode` encrypts, so the host must be a name or address its certificate carries, not `{host}`"
            ));
        }
        config.ssl_mode(if encrypt {
            SslMode::Require
        } else {
            SslMode::Disable
        });
        let roots = if encrypt {
            roots(root.as_deref())?
        } else {
            rustls::RootCertStore::empty()
        };
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("postgres TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(PgTarget {
            config,
            socket: None,
            host,
            tls: MakeRustlsConnect::new(client),
        })
    }

    /// The same server reached through the socket in `dir` (a relay that carries the store's
    /// bytes, listening at `.s.PGSQL.5432` whatever the server's port): same database, user,
    /// password and options, and, when encrypted, TLS to the URL's host through it.
    pub fn via_socket(mut self, dir: &Path) -> PgTarget {
        if self.encrypted() {
            self.socket = Some(dir.join(SOCKET_FILE));
            return self;
        }
        let old = &self.config;
        let mut c = tokio_postgres::Config::new();
        c.host_path(dir);
        c.port(5432);
        c.ssl_mode(SslMode::Disable);
        if let Some(u) = old.get_user() {
            c.user(u);
        }
        if let Some(p) = old.get_password() {
            c.password(p);
        }
        if let Some(d) = old.get_dbname() {
            c.dbname(d);
        }
        if let Some(o) = old.get_options() {
            c.options(o);
        }
        self.config = c;
        self
    }

    /// Whether its connections are encrypted (and the server verified).
    pub fn encrypted(&self) -> bool {
        self.config.get_ssl_mode() == SslMode::Require
    }

    /// The connection settings (timeouts, options and the application name are the caller's).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The connection settings, to change.
    pub fn config_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.config
    }

    /// Asks the server to cancel the statement running on the connection of `token` (over a
    /// new connection, encrypted as the others are).
    pub async fn cancel(
        &self,
        token: &tokio_postgres::CancelToken,
    ) -> Result<(), tokio_postgres::Error> {
        if self.encrypted() {
            token.cancel_query(self.tls.clone()).await
        } else {
            token.cancel_query(tokio_postgres::NoTls).await
        }
    }

    /// Opens a connection; its task runs until the client drops.
    pub async fn connect(&self) -> Connected {
        // tokio-postgres asks the TLS connector for the host's name before it reads the mode,
        // and a socket path is no name: a connection in clear gets no connector at all.
        if !self.encrypted() {
            let (client, connection) = self.config.connect(tokio_postgres::NoTls).await?;
            return Ok(spawned(client, connection));
        }
        let Some(path) = &self.socket else {
            let (client, connection) = self.config.connect(self.tls.clone()).await?;
            return Ok(spawned(client, connection));
        };
        let wait = self
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(30));
        match tokio::time::timeout(wait, tokio::net::UnixStream::connect(path)).await {
            Ok(Ok(stream)) => self.handshake(stream).await,
            Ok(Err(e)) => self.handshake(Failed(Some(e))).await,
            Err(_) => {
                let e = io::Error::new(io::ErrorKind::TimedOut, "connecting to the store socket");
                self.handshake(Failed(Some(e))).await
            }
        }
    }

    /// The PostgreSQL handshake (TLS first when encrypted, to the URL's host) over `stream`, a
    /// connection already open to the server or to something that carries its bytes.
    pub async fn handshake<S>(&self, stream: S) -> Connected
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        if !self.encrypted() {
            let (client, connection) = self
                .config
                .connect_raw(stream, tokio_postgres::NoTls)
                .await?;
            return Ok(spawned(client, connection));
        }
        match tokio_postgres::tls::MakeTlsConnect::<S>::make_tls_connect(
            &mut self.tls.clone(),
            &self.host,
        ) {
            Ok(tls) => {
                let (client, connection) = self.config.connect_raw(stream, tls).await?;
                Ok(spawned(client, connection))
            }
            // `parse` refuses a host that is no server name; were one here, the handshake fails.
            Err(e) => {
                let e = io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
                let (client, connection) = self
                    .config
                    .connect_raw(Failed(Some(e)), tokio_postgres::NoTls)
                    .await?;
                Ok(spawned(client, connection))
            }
        }
    }

    /// A pool manager whose connections are opened as [`connect`](Self::connect) opens them.
    pub fn manager(&self, config: deadpool_postgres::ManagerConfig) -> deadpool_postgres::Manager {
        deadpool_postgres::Manager::from_connect(self.config.clone(), Pooled(self.clone()), config)
    }
}

/// The client of a connection whose task now runs.
fn spawned<S, T>(
    client: tokio_postgres::Client,
    connection: tokio_postgres::Connection<S, T>,
) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    (client, task)
}

/// The connection settings of `url` but its TLS (hosts, ports, database, user): what a relay
/// that carries the connection's bytes needs.
pub fn settings(url: &str) -> Result<tokio_postgres::Config, String> {
    take_tls_keys(url)
        .0
        .parse()
        .map_err(|e| format!("postgres url: {e}"))
}

/// Connections of a pool, opened with the pool's settings.
struct Pooled(PgTarget);

impl deadpool_postgres::Connect for Pooled {
    fn connect(&self, pg_config: &tokio_postgres::Config) -> BoxFuture<'_, Connected> {
        let mut target = self.0.clone();
        target.config = pg_config.clone();
        Box::pin(async move { target.connect().await })
    }
}

/// `url` without its `sslmode` and `sslrootcert` (tokio-postgres knows three modes and no root
/// file), and their values.
fn take_tls_keys(url: &str) -> (String, Option<String>, Option<String>) {
    let (mut mode, mut root) = (None, None);
    let mut take = |key: &str, value: String| match key {
        "sslmode" => {
            mode = Some(value);
            true
        }
        "sslrootcert" => {
            root = Some(value);
            true
        }
        _ => false,
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_string(), None, None);
        };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                !take(k, decode(v))
            })
            .collect();
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, mode, root);
    }
    let kept: Vec<&str> = url
        .split_whitespace()
        .filter(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            !take(k.trim(), v.trim_matches('\'').to_string())
        })
        .collect();
    (kept.join(" "), mode, root)
}

/// A URL query value with `%XX` escapes decoded (a path may hold `%2F`).
fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The certificate authorities a server is verified against: `sslrootcert` (a PEM file), or
/// the system's (`system`, or none named).
fn roots(root: Option<&str>) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut store = rustls::RootCertStore::empty();
    match root.filter(|r| *r != "system") {
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| format!("postgres url: sslrootcert `{path}` cannot be read: {e}"))?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    format!("postgres url: sslrootcert `{path}` holds no PEM certificates: {e}")
                })?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!(
                    "postgres url: sslrootcert `{path}` holds no PEM certificates"
                ));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "postgres url: `sslmode` encrypts, but this system has no CA certificates: name them with `sslrootcert`".into(),
                );
            }
        }
    }
    Ok(store)
}

/// A stream that fails with its error: turns an error opening a stream into the handshake's
/// own error type.
pub(crate) struct Failed(pub Option<io::Error>);

impl AsyncRead for Failed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Err(self
            .0
            .take()
            .unwrap_or_else(|| io::Error::other("closed"))))
    }
}

impl AsyncWrite for Failed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(self
            .0
            .take()
            .unwrap_or_else(|| io::Error::other("closed"))))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_keys_leave_the_url_and_the_rest_stays() {
        let (rest, mode, root) = take_tls_keys(
            "postgres://u:p@db:5432/x?application_name=a&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(rest, "postgres://u:p@db:5432/x?application_name=a");
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        let (rest, mode, _) = take_tls_keys("host=db user=u sslmode=require");
        assert_eq!(rest, "host=db user=u");
        assert_eq!(mode.as_deref(), Some("require"));
    }

    #[test]
    fn modes_that_fall_back_to_clear_text_are_refused() {
        for m in ["prefer", "allow"] {
            let e = PgTarget::parse(&format!("postgres://u@db/x?sslmode={m}"))
                .err()
                .unwrap();
            assert!(e.contains("falls back to clear text"), "{e}");
        }
        assert!(!PgTarget::parse("postgres://u@db/x").unwrap().encrypted());
        assert!(
            PgTarget::parse("postgres://u@db/x?sslrootcert=/x")
                .err()
                .unwrap()
                .contains("needs an `sslmode` that encrypts")
        );
    }
}
