//! `bulkhead serve`: one server instance over Streamable HTTP or stdio.

use bulkhead::auth::Verifier;
use bulkhead::config::Config;
use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use bulkhead::serve;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How to serve.
pub struct ServeArgs {
    /// Server name.
    pub server: String,
    /// `http` or `stdio`.
    pub stdio: bool,
    /// Listen address for HTTP.
    pub listen: SocketAddr,
    /// Network mode of this instance.
    pub mode: NetworkMode,
}

/// Runs until Ctrl-C / SIGTERM (HTTP) or end of input (stdio).
pub fn run(config: &Config, args: ServeArgs) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async move {
        let rt = Arc::new(serve::runtime(config, &args.server, args.mode).await?);
        let telemetry = bulkhead::telemetry::start(&config.telemetry)?;
        if let Err(e) = bulkhead::isolation::selfcheck::check(args.mode) {
            // Not fatal (a developer may run it so on purpose); /readyz stays 503 meanwhile.
            tracing::warn!("{e}");
            eprintln!("bulkhead: warning: {e}; /readyz answers 503 until it is fixed");
        }
        if args.stdio {
            let id = Identity::new(&config.stdio.user, &config.stdio.session)?;
            tracing::info!(server = %args.server, mode = %args.mode, identity = %id, "serving on stdio");
            return serve::stdio::serve(rt, id).await;
        }
        let verifier = Verifier::new(&config.auth)?;
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        let addr = listener.local_addr()?;
        let public_url = config.http.public_url.clone().unwrap_or_else(|| format!("http://{addr}"));
        let shutdown = CancellationToken::new();
        let app = serve::http::router(rt, verifier, &config.auth.issuer, &config.http, &public_url, shutdown.clone());
        eprintln!("bulkhead: serving `{}` ({} mode) at {public_url}/mcp  (health: {public_url}/healthz)", args.server, args.mode);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            stop.cancel();
        });
        let limits = config.http.conn_limits();
        serve::http::serve_with(listener, app, shutdown, limits, Default::default()).await?;
        if let Some(t) = telemetry {
            t.shutdown().await;
        }
        eprintln!("bulkhead: `{}` stopped", args.server);
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}
