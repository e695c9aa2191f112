//! `bulkhead state`: create a server's compliance store explicitly, check it, or recover from a
//! lost one (never silently: see `bulkhead::state::init`).

use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use bulkhead::project::Project;
use bulkhead::state::InitPolicy;
use clap::Subcommand;
use std::process::ExitCode;

/// What to do with the store.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Create the store of a server (and record it in its workspace root).
    Init {
        /// Server name.
        #[arg(long)]
        server: String,
        /// Create a new store although the workspaces belong to a lost one: every session with
        /// files starts at `secret` (its history is unknown). Revoke the old sessions' tokens.
        #[arg(long)]
        force: bool,
    },
    /// Fold the per-server stores from before trust domains into the trust domain's store (every
    /// session at no lower level; workspace markers rewritten). Run with every instance stopped.
    Migrate,
    /// Open the store as an instance would and report whether it may serve.
    Check {
        /// Server name.
        #[arg(long)]
        server: String,
    },
}

/// Runs one action.
pub fn run(project: &Project, config: &Config, action: Action) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match action {
            Action::Init { server, force: false } => {
                let store =
                    bulkhead::serve::open_state(config, &server, NetworkMode::Full, InitPolicy::Create).await?;
                println!(
                    "compliance store of `{server}` is {} at {}",
                    store.store_id(),
                    config.state.location().describe()
                );
            }
            Action::Init { server, force: true } => {
                let recovered = bulkhead::state::init::force_init(
                    &config.state.location(),
                    bulkhead::serve::store_options(config, &server),
                    &NetworkMode::ALL
                        .map(|m| config.state.workspace_layer(&server, m)),
                )
                .await?;
                println!(
                    "new compliance store for `{server}`; {} session(s) with files recorded at secret",
                    recovered.len()
                );
                for id in recovered {
                    println!("  {id}");
                }
                println!(
                    "sessions without files start at public again: revoke their tokens (rotate the signing key or the session ids)"
                );
            }
            Action::Migrate => {
                let servers: Vec<(String, Vec<std::path::PathBuf>)> = project
                    .servers
                    .iter()
                    .map(|s| {
                        let layers = NetworkMode::ALL
                            .map(|m| config.state.workspace_layer(s.name, m))
                            .to_vec();
                        (s.name.to_string(), layers)
                    })
                    .collect();
                let folded = bulkhead::state::migrate::migrate(
                    &config.state.location(),
                    &config.state.dir,
                    bulkhead::serve::store_options(config, &config.state.trust_domain),
                    &servers,
                )
                .await?;
                if folded.is_empty() {
                    println!("nothing to migrate: no per-server store beside trust domain `{}`", config.state.trust_domain);
                }
                for f in folded {
                    println!(
                        "folded the store of `{}` into trust domain `{}`: {} session(s), {} workspace marker(s) rewritten",
                        f.server, config.state.trust_domain, f.sessions, f.markers
                    );
                }
            }
            Action::Check { server } => {
                let store =
                    bulkhead::serve::open_state(config, &server, NetworkMode::Full, InitPolicy::MustExist).await?;
                store.check().await?;
                println!("compliance store of `{server}` ({}) is in place", store.store_id());
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
