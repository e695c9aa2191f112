//! (a) Bulkhead serving the generated `template` server (what users run): its `read_file`,
//! `write_file` and every other tool, through the real runtime and HTTP stack, on a `full`
//! instance with the bench's HS256 key. Also the configuration and HTTP stack of the hand-built
//! echo server ([`super::bulkhead_echo`]).

use bulkhead::auth::Verifier;
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The configuration of the bench's `template` instance, state under `state`.
pub fn config(
    secret: &str,
    stateful: bool,
    state: &Path,
    store: &str,
    extra: &str,
) -> anyhow::Result<Config> {
    let d = state.display();
    let text = format!(
        "auth:\n  issuer: {iss}\n  audience: {aud}\n  keys:\n    - {{ kid: perf, alg: HS256, secret: {secret} }}\nhttp:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: {stateful}\nstate:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n  store: \"{store}\"\n",
        iss = crate::ISSUER,
        aud = crate::AUDIENCE,
    );
    Ok(Config::parse(&format!("{text}{extra}"), "bench", &|_| {
        None
    })?)
}

/// The router of the generated `template` server.
pub async fn router(config: &Config, cancel: CancellationToken) -> anyhow::Result<axum::Router> {
    let rt = bulkhead::serve::runtime(
        &bulkhead_example::servers::PROJECT,
        config,
        "template",
        NetworkMode::Full,
    )
    .await?;
    serve(rt, config, cancel)
}

/// The HTTP router of a bench runtime, with the bench's token verifier.
pub fn serve(
    rt: bulkhead::call::Runtime,
    config: &Config,
    cancel: CancellationToken,
) -> anyhow::Result<axum::Router> {
    let verifier = Verifier::new(&config.auth)?;
    Ok(bulkhead::serve::http::router(
        Arc::new(rt),
        verifier,
        &config.auth.issuer,
        &config.http,
        "http://127.0.0.1",
        cancel,
    ))
}
