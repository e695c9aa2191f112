//! `bulkhead serve`: one server instance over Streamable HTTP or stdio.

use bulkhead::auth::Verifier;
use bulkhead::config::Config;
use bulkhead::endpoint::{Bound, Endpoint};
use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use bulkhead::project::Project;
use bulkhead::relay::Route;
use bulkhead::serve;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How to serve.
pub struct ServeArgs {
    /// Server name.
    pub server: String,
    /// `http` or `stdio`.
    pub stdio: bool,
    /// Where HTTP is served: a TCP address or a Unix socket.
    pub listen: Endpoint,
    /// Relays this process runs beside serving (a `network_mode: none` instance reaches its egress
    /// proxy through a loopback port forwarded to a socket).
    pub forward: Vec<Route>,
    /// Network mode of this instance.
    pub mode: NetworkMode,
    /// Skip the isolation self-check (development and tests on one host network).
    pub unisolated: bool,
}

/// Runs until Ctrl-C / SIGTERM (HTTP) or end of input (stdio).
pub fn run(project: &'static Project, config: &Config, args: ServeArgs) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async move {
        // The forwards come first: the isolation self-check probes the egress proxy through them.
        let forwards_stop = CancellationToken::new();
        let _stop_forwards = forwards_stop.clone().drop_guard();
        for (route, listener) in bulkhead::relay::bind(&args.forward).await? {
            tokio::spawn(bulkhead::relay::run(route, listener, Default::default(), forwards_stop.clone()));
        }
        for var in bulkhead::config::env::plain_secrets(config.secret_vars.iter().map(String::as_str)) {
            tracing::warn!(
                var,
                "a credential of the configuration is set as a plain environment variable; pass it as a file ({var}_FILE), as every generated deployment does"
            );
        }
        let rt = Arc::new(serve::runtime(project, config, &args.server, args.mode).await?);
        let telemetry = bulkhead::telemetry::start(&config.telemetry)?;
        let checks_stop = CancellationToken::new();
        if args.unisolated {
            rt.isolation().mark_unchecked();
            if args.mode.is_isolated() {
                tracing::warn!(mode = %args.mode, "started with --unisolated: the network is not checked");
                eprintln!("bulkhead: warning: `--mode {}` with --unisolated: this instance's network is not checked and may reach anything; /readyz answers 503", args.mode);
            }
        } else {
            // Refuse to serve when the network does not match the mode; check again while serving.
            bulkhead::isolation::selfcheck::full_check(args.mode)
                .await
                .map_err(|e| anyhow::anyhow!("refusing to serve: {e} (for development on one host network, pass --unisolated)"))?;
            if args.mode.is_isolated() {
                tokio::spawn(bulkhead::isolation::selfcheck::recheck_forever(
                    args.mode,
                    rt.isolation().clone(),
                    checks_stop.clone(),
                ));
            }
        }
        let _stop_checks = checks_stop.drop_guard();
        if args.stdio {
            let id = Identity::new(&config.stdio.user, &config.stdio.session)?;
            tracing::info!(server = %args.server, mode = %args.mode, identity = %id, "serving on stdio");
            return Ok(serve::stdio::serve(rt, id).await?);
        }
        let tokens = bulkhead::sessions::TokenService::from_config(config)?.map(Arc::new);
        let verifier = match &tokens {
            Some(t) => Verifier::with_session_key(&config.auth, t.key().public_jwk())?,
            None => Verifier::new(&config.auth)?,
        };
        let listener = Bound::bind(&args.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
        // Behind a relay (a Unix socket) the instance cannot know the address clients use.
        let public_url = config.http.public_url.clone().unwrap_or_else(|| match listener.local() {
            Ok(Endpoint::Tcp(addr)) => format!("http://{addr}"),
            _ => "http://localhost".to_string(),
        });
        let shutdown = CancellationToken::new();
        let app = serve::http::router_with_tokens(rt, verifier, &config.auth.issuer, &config.http, &public_url, shutdown.clone(), tokens);
        eprintln!("bulkhead: serving `{}` ({} mode) at {public_url}/mcp  (health: {public_url}/healthz; listening on {})", args.server, args.mode, args.listen);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            stop.cancel();
        });
        let limits = bulkhead::serve::listener::ConnLimits::from_config(&config.http);
        serve::http::serve_with(listener, app, shutdown, limits, Default::default()).await?;
        if let Some(t) = telemetry {
            t.shutdown().await;
        }
        eprintln!("bulkhead: `{}` ({}) stopped", args.server, args.mode);
        Ok(())
    })
}

pub(super) async fn shutdown_signal() {
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
