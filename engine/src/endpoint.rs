//! Where a stream listens or connects: a TCP `host:port` or a Unix socket path. An instance with
//! no network at all (compose `network_mode: none`) serves on a Unix socket and reaches its egress
//! proxy through one; everything else speaks TCP. One parser and one pair of bind/connect
//! functions for `serve --listen`, `serve --forward` and `bulkhead relay`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_util::either::Either;

/// A TCP or Unix-socket stream.
pub type Stream = Either<TcpStream, UnixStream>;

/// A stream endpoint: `host:port` (or `tcp:host:port`) or `unix:/absolute/path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A TCP address, `host:port` (a name is resolved at bind/connect time).
    Tcp(String),
    /// A Unix stream socket.
    Unix(PathBuf),
}

/// Why an endpoint did not parse.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{given}` is not an endpoint: {why} (expected `host:port`, `tcp:host:port` or `unix:/path`)"
)]
pub struct EndpointError {
    given: String,
    why: &'static str,
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why| EndpointError {
            given: s.to_string(),
            why,
        };
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(err("a socket path must be absolute"));
            }
            // sun_path holds 108 bytes with the terminating NUL.
            if path.len() > 107 {
                return Err(err("a socket path has at most 107 bytes"));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        let addr = s.strip_prefix("tcp:").unwrap_or(s);
        let (host, port) = addr.rsplit_once(':').ok_or_else(|| err("no port"))?;
        if host.is_empty() {
            return Err(err("no host"));
        }
        port.parse::<u16>()
            .map_err(|_| err("the port is not a number up to 65535"))?;
        Ok(Endpoint::Tcp(addr.to_string()))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(a) => f.write_str(a),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A bound listener on an [`Endpoint`].
#[derive(Debug)]
pub enum Bound {
    /// Listening on TCP.
    Tcp(TcpListener),
    /// Listening on a Unix socket at the path.
    Unix(UnixListener, PathBuf),
}

impl Bound {
    /// Binds `ep`. A Unix socket left behind by an earlier process at that path is replaced (a
    /// restarted container finds its old socket on the volume); any other file there is an error.
    pub async fn bind(ep: &Endpoint) -> io::Result<Bound> {
        match ep {
            Endpoint::Tcp(a) => Ok(Bound::Tcp(TcpListener::bind(a.as_str()).await?)),
            Endpoint::Unix(path) => {
                remove_stale_socket(path)?;
                Ok(Bound::Unix(UnixListener::bind(path)?, path.clone()))
            }
        }
    }

    /// Accepts one connection (TCP_NODELAY set on TCP).
    pub async fn accept(&self) -> io::Result<Stream> {
        match self {
            Bound::Tcp(l) => {
                let (s, _) = l.accept().await?;
                if let Err(e) = s.set_nodelay(true) {
                    tracing::warn!(error = %e, "cannot set TCP_NODELAY");
                }
                Ok(Either::Left(s))
            }
            Bound::Unix(l, _) => Ok(Either::Right(l.accept().await?.0)),
        }
    }

    /// The bound endpoint (the real port when bound to port 0).
    pub fn local(&self) -> io::Result<Endpoint> {
        match self {
            Bound::Tcp(l) => Ok(Endpoint::Tcp(l.local_addr()?.to_string())),
            Bound::Unix(_, p) => Ok(Endpoint::Unix(p.clone())),
        }
    }
}

impl From<TcpListener> for Bound {
    fn from(l: TcpListener) -> Self {
        Bound::Tcp(l)
    }
}

fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Connects to `ep`.
pub async fn connect(ep: &Endpoint) -> io::Result<Stream> {
    match ep {
        Endpoint::Tcp(a) => {
            let s = TcpStream::connect(a.as_str()).await?;
            let _ = s.set_nodelay(true);
            Ok(Either::Left(s))
        }
        Endpoint::Unix(p) => Ok(Either::Right(UnixStream::connect(p).await?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_print_back() {
        for s in [
            "127.0.0.1:8000",
            "template-egress-proxy:3128",
            "[::1]:80",
            "unix:/run/x.sock",
        ] {
            assert_eq!(s.parse::<Endpoint>().unwrap().to_string(), s);
        }
        assert_eq!(
            "tcp:a:1".parse::<Endpoint>().unwrap(),
            Endpoint::Tcp("a:1".into())
        );
        for bad in ["unix:rel.sock", "8000", ":80", "a:99999", "a:b"] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
        let long = format!("unix:/{}", "x".repeat(120));
        assert!(long.parse::<Endpoint>().is_err());
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_another_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let ep = Endpoint::Unix(path.clone());
        drop(Bound::bind(&ep).await.unwrap());
        assert!(
            path.exists(),
            "the socket file stays after the listener is gone"
        );
        let again = Bound::bind(&ep).await.unwrap();
        let (_c, s) = tokio::join!(connect(&ep), again.accept());
        s.unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "data").unwrap();
        let err = Bound::bind(&Endpoint::Unix(file.clone()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("is not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
    }
}
