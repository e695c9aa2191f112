//! `bulkhead relay`: copies bytes along fixed routes, and carries connections over reverse
//! tunnels, until SIGTERM (see [`bulkhead::relay`] and [`bulkhead::tunnel`]).

use bulkhead::endpoint::{Bound, Endpoint};
use bulkhead::relay::{RelayLimits, Route};
use bulkhead::tunnel::TunnelLimits;
use tokio_util::sync::CancellationToken;

/// What one relay process carries.
pub struct Routes {
    /// `LISTEN=TARGET` byte routes.
    pub routes: Vec<Route>,
    /// `LOCAL=TUNNELS`: local connections over tunnels that arrive.
    pub tunnel_accept: Vec<Route>,
    /// `TUNNELS=TARGET`: tunnels kept open to TUNNELS, relayed to TARGET when used.
    pub tunnel_dial: Vec<Route>,
    /// Tunnel addresses whose target is the store of `store_url_file`.
    pub tunnel_dial_store: Vec<String>,
    /// The file with the state store's URL.
    pub store_url_file: Option<std::path::PathBuf>,
    /// Idle tunnels per accept route, or per address of a dial route.
    pub tunnel_idle: usize,
}

/// The `host:port` of the PostgreSQL URL in `file` (its first TCP host; port 5432 by default).
fn store_address(file: &std::path::Path) -> anyhow::Result<Endpoint> {
    let url =
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    // Read as the store reads it (its TLS settings aside: the tunnel carries TLS untouched).
    let config = bulkhead::pg_tls::settings(url.trim())
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let host = config
        .get_hosts()
        .iter()
        .find_map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => Some(h.clone()),
            tokio_postgres::config::Host::Unix(_) => None,
        })
        .ok_or_else(|| anyhow::anyhow!("{}: the URL names no TCP host", file.display()))?;
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Ok(Endpoint::Tcp(format!("{host}:{port}")))
}

/// A tunnel endpoint must be TCP (`host:port`).
fn tcp(ep: &Endpoint, what: &str) -> anyhow::Result<String> {
    match ep {
        Endpoint::Tcp(a) => Ok(a.clone()),
        Endpoint::Unix(p) => anyhow::bail!(
            "{what} must be host:port (tunnels cross the network), not unix:{}",
            p.display()
        ),
    }
}

/// Runs the routes until Ctrl-C / SIGTERM.
pub fn run(routes: Routes, max_connections: usize, idle_timeout_s: u64) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async move {
        let stop = CancellationToken::new();
        let limits = RelayLimits {
            max_connections,
            idle_timeout: std::time::Duration::from_secs(idle_timeout_s.max(1)),
            ..RelayLimits::default()
        };
        let tunnel_limits = TunnelLimits {
            idle: routes.tunnel_idle.max(1),
            relay: limits,
        };
        let bound = bulkhead::relay::bind(&routes.routes).await?;
        let mut accepting = Vec::new();
        for r in &routes.tunnel_accept {
            let tunnels = tcp(&r.target, "a tunnel-accept route's TUNNELS")?;
            let local = Bound::bind(&r.listen).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", r.listen))
            })?;
            let tunnels_l = tokio::net::TcpListener::bind(tunnels.as_str())
                .await
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot listen on {tunnels}: {e}"))
                })?;
            accepting.push((r.clone(), local, tunnels_l));
        }
        for r in &routes.tunnel_dial {
            tcp(&r.listen, "a tunnel-dial route's TUNNELS")?;
        }
        for (route, _) in &bound {
            eprintln!("bulkhead: relaying {route}");
        }
        let mut tasks: Vec<_> = bound
            .into_iter()
            .map(|(r, l)| tokio::spawn(bulkhead::relay::run(r, l, limits, stop.clone())))
            .collect();
        for (r, local, tunnels) in accepting {
            eprintln!(
                "bulkhead: carrying {} over tunnels accepted on {}",
                r.listen, r.target
            );
            tasks.push(tokio::spawn(bulkhead::tunnel::accept_side(
                local,
                tunnels,
                tunnel_limits,
                stop.clone(),
            )));
        }
        let mut dial = routes.tunnel_dial;
        if let Some(file) = &routes.store_url_file {
            let store = store_address(file)?;
            for t in &routes.tunnel_dial_store {
                dial.push(Route {
                    listen: Endpoint::Tcp(t.clone()),
                    target: store.clone(),
                });
            }
        }
        for r in dial {
            let tunnels = tcp(&r.listen, "a tunnel-dial route's TUNNELS")?;
            eprintln!(
                "bulkhead: keeping {} tunnel(s) open to {tunnels} for {}",
                tunnel_limits.idle, r.target
            );
            tasks.push(tokio::spawn(bulkhead::tunnel::dial_side(
                tunnels,
                r.target,
                tunnel_limits,
                stop.clone(),
            )));
        }
        super::serve::shutdown_signal().await;
        stop.cancel();
        for t in tasks {
            let _ = t.await;
        }
        Ok(())
    })
}
