//! `bulkhead relay`: copies bytes along fixed routes until SIGTERM (see [`bulkhead::relay`]).

use bulkhead::relay::{RelayLimits, Route};
use tokio_util::sync::CancellationToken;

/// Runs the routes until Ctrl-C / SIGTERM.
pub fn run(routes: Vec<Route>, max_connections: usize, idle_timeout_s: u64) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async move {
        let stop = CancellationToken::new();
        let bound = bulkhead::relay::bind(&routes).await?;
        let limits = RelayLimits {
            max_connections,
            idle_timeout: std::time::Duration::from_secs(idle_timeout_s.max(1)),
            ..RelayLimits::default()
        };
        for (route, _) in &bound {
            eprintln!("bulkhead: relaying {route}");
        }
        let tasks: Vec<_> = bound
            .into_iter()
            .map(|(r, l)| tokio::spawn(bulkhead::relay::run(r, l, limits, stop.clone())))
            .collect();
        super::serve::shutdown_signal().await;
        stop.cancel();
        for t in tasks {
            let _ = t.await;
        }
        Ok(())
    })
}
