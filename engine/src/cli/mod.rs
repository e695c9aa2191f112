//! Command-line interface: parse arguments, run one command, map errors to exit codes.

mod audit;
mod check;
mod code_changed;
mod committed;
mod connect;
mod demo;
mod dev;
mod engine_inputs;
mod git;
mod import;
mod init;
mod mcp;
mod new;
mod relay;
mod runner;
mod samples;
mod serve;
mod state;
mod token;
mod tools;
mod up;

use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use bulkhead::project::Project;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// Bulkhead: MCP servers from YAML specs, with permission, context and sensitivity enforced.
#[derive(Debug, Parser)]
#[command(name = "bulkhead", version, about, long_about = None)]
pub struct Cli {
    /// Runtime configuration (default: ./config.yaml if present, else the embedded defaults).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Transport {
    /// Streamable HTTP with bearer tokens.
    Http,
    /// stdin/stdout; identity from `stdio:` in the configuration.
    Stdio,
}

/// `--mode`: the vocabulary's [`NetworkMode`], its names offered as the possible values.
fn mode_parser() -> impl clap::builder::TypedValueParser<Value = NetworkMode> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(NetworkMode::ALL.map(NetworkMode::as_str)).try_map(
        |name: String| {
            NetworkMode::parse(&name).ok_or_else(|| format!("`{name}` is not a network mode"))
        },
    )
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate specs/ and print every diagnostic, without building anything.
    Check {
        /// The project folder holding specs/.
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// A git revision to compare the effective policy (specs/ and config.yaml) with. Exits 3
        /// when it is weakened and the weakening is not in specs/policy-acks.yaml, 4 when no
        /// revision within 20 first-parent commits of REV loads.
        #[arg(long, value_name = "REV")]
        against: Option<String>,
        /// With --against: what the base revision's generator made of these specs
        /// (`bulkhead-check --generate-into`, built from the base); every file of `generated/`
        /// that differs is a `rules-changed` weakening.
        #[arg(long, value_name = "DIR", requires = "against")]
        base_generated: Option<PathBuf>,
    },
    /// Serve one generated server.
    Serve {
        /// Server name (a file in specs/servers/).
        server: String,
        /// Transport.
        #[arg(long, value_enum, default_value = "http")]
        transport: Transport,
        /// Where HTTP is served: `host:port` or `unix:/path/to.sock`.
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: bulkhead::endpoint::Endpoint,
        /// A relay to run beside serving, `LISTEN=TARGET` (repeatable): a `network_mode: none`
        /// instance reaches its egress proxy with `127.0.0.1:3128=unix:/run/bulkhead/egress/proxy.sock`.
        #[arg(long)]
        forward: Vec<bulkhead::relay::Route>,
        /// Network mode of this instance; it refuses sessions that need a more isolated one.
        #[arg(long, value_parser = mode_parser(), default_value = "full")]
        mode: NetworkMode,
        /// Extra accepted `Host` values (added to `http.allowed_hosts`).
        #[arg(long = "allow-host")]
        allow_hosts: Vec<String>,
        /// Serve `--mode proxied|none` without checking that the network is isolated
        /// (development and tests on one host network; /readyz then answers 503).
        #[arg(long)]
        unisolated: bool,
    },
    /// Relay connections between TCP and Unix-socket endpoints (how a compose deployment reaches
    /// its `network_mode: none` instances and how a proxied one reaches its egress proxy).
    Relay {
        /// `LISTEN=TARGET`, each `host:port`, `tcp:host:port` or `unix:/path` (repeatable).
        #[arg(long = "route", required_unless_present_any = ["tunnel_accept", "tunnel_dial", "tunnel_dial_store"])]
        routes: Vec<bulkhead::relay::Route>,
        /// `LOCAL=TUNNELS`: connections accepted on LOCAL (e.g. `unix:/run/bulkhead/sock/store.sock`)
        /// are carried over tunnels accepted on TUNNELS (`host:port`); this side never dials
        /// (an isolated pod's way to its state store). Repeatable.
        #[arg(long = "tunnel-accept")]
        tunnel_accept: Vec<bulkhead::relay::Route>,
        /// `TUNNELS=TARGET`: keeps idle tunnels open to every address TUNNELS (`host:port`)
        /// resolves to, and relays each one put to use to TARGET (the store). Repeatable.
        #[arg(long = "tunnel-dial")]
        tunnel_dial: Vec<bulkhead::relay::Route>,
        /// `TUNNELS`: as `--tunnel-dial TUNNELS=TARGET`, the target being the host and port of
        /// the PostgreSQL URL in `--store-url-file` (the state store's Secret). Repeatable.
        #[arg(long = "tunnel-dial-store", requires = "store_url_file")]
        tunnel_dial_store: Vec<String>,
        /// A file holding the state store's `postgres://` URL (for `--tunnel-dial-store`).
        #[arg(long)]
        store_url_file: Option<std::path::PathBuf>,
        /// Idle tunnels held (accept side) or kept per address (dial side).
        #[arg(long, default_value_t = 8)]
        tunnel_idle: usize,
        /// Most connections relayed at once per route.
        #[arg(long, default_value_t = 1024)]
        max_connections: usize,
        /// Seconds without a byte either way before a relayed connection is closed.
        #[arg(long, default_value_t = 900)]
        idle_timeout_s: u64,
    },
    /// Run a deployment locally: every instance, the isolated ones in network namespaces (needs root).
    Up {
        /// Deployment name (a file in specs/deployments/).
        #[arg(long, default_value = "local")]
        deployment: String,
        /// Development without root: every instance as a plain process on 127.0.0.1, with no
        /// network isolation (each says so in /healthz and /readyz). Same ports as compose.
        #[arg(long)]
        unisolated: bool,
        /// With --unisolated: the first server's full instance listens here (others follow).
        #[arg(long, value_name = "PORT")]
        port: Option<u16>,
    },
    /// Walk the seeds' scenarios against local instances of `template`, printing each step.
    Demo,
    /// A stdio MCP server for desktop clients that routes each call to the instance its data
    /// needs (one way, as the isolating client does). Token from BULKHEAD_TOKEN.
    Connect {
        /// Server name.
        server: String,
        /// The full instance (default: the config's `mcp_servers.<server>.url`).
        #[arg(long)]
        url: Option<String>,
        /// The proxied instance.
        #[arg(long)]
        url_proxied: Option<String>,
        /// The isolated (`none`) instance.
        #[arg(long)]
        url_isolated: Option<String>,
        /// Sign in with the device grant even when a browser sign-in is configured (no browser
        /// at hand).
        #[arg(long)]
        device: bool,
    },
    /// Pin an `mcp` connector's upstream (`lock`), or report its drift from the lock (`check`).
    Mcp {
        #[command(subcommand)]
        action: mcp::Action,
        /// The project folder holding specs/.
        #[arg(long, default_value = ".", global = true)]
        root: PathBuf,
    },
    /// Import what others wrote: `import mcp --name N -- <command…>` (or `--url`), `import
    /// openapi FILE|URL --server N`, `import toolbox tools.yaml --server N`.
    Import {
        #[command(subcommand)]
        what: import::Import,
        /// The project folder holding specs/.
        #[arg(long, default_value = ".", global = true)]
        root: PathBuf,
    },
    /// Check the audit log: every record chained, nothing altered, removed, reordered or
    /// appended, no tail cut (exit 1 naming the first record that fails).
    Audit {
        #[command(subcommand)]
        action: audit::Action,
    },
    /// Create, check or recover a server's compliance store.
    State {
        #[command(subcommand)]
        action: state::Action,
    },
    /// Scaffold a server or a tool: the spec with every required key, and for `handler: rust`
    /// the handler module wired into `src/handlers/`.
    New {
        #[command(subcommand)]
        what: new::What,
        /// The project folder holding specs/ and src/.
        #[arg(long, default_value = ".", global = true)]
        root: PathBuf,
    },
    /// Write a new project into DIR (a new or empty folder): its own crate depending on the
    /// engine, one starter server named after the folder, a test, a CI file. Refuses a folder
    /// that is not empty, and writes nothing then.
    Init {
        /// The new project's folder (its name is the package's; `-` becomes `_` in the server's).
        dir: PathBuf,
        /// The engine's checkout (the folder holding engine/ and codegen/), relative to DIR.
        /// Default: the checkout this program was built from, while it exists; else the
        /// registry version of this engine.
        #[arg(long, value_name = "REL", conflicts_with_all = ["engine_git", "engine_version"])]
        engine_path: Option<String>,
        /// The engine from a git repository.
        #[arg(long, value_name = "URL", conflicts_with = "engine_version")]
        engine_git: Option<String>,
        /// With --engine-git: the commit, tag or branch to pin.
        #[arg(long, value_name = "REV", requires = "engine_git")]
        engine_rev: Option<String>,
        /// The engine by registry version.
        #[arg(long, value_name = "VERSION")]
        engine_version: Option<String>,
    },
    /// Serve a server, and rebuild and restart it whenever specs/ or src/handlers/ change.
    Dev {
        /// Server name.
        server: String,
        /// The project folder.
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// Listen address.
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: String,
        /// The build command run after a change.
        #[arg(long, default_value = "cargo build")]
        build: String,
        /// The binary that serves after a build (default: this program, which the build rewrites).
        #[arg(long)]
        exe: Option<PathBuf>,
        /// Stop after this many rebuilds (default: never).
        #[arg(long)]
        max_rebuilds: Option<usize>,
    },
    /// List each tool of a server: permission, sensitivity, context preset, what it runs, and the
    /// instance it runs on.
    Tools {
        /// Server name (default: every server).
        server: Option<String>,
        /// The project folder: its specs/ are listed when it has them (what `check` reads),
        /// otherwise the specs compiled into this binary.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Mint a development token from the configured HS256 key (refused for production configs).
    Token {
        /// User id (`sub`).
        #[arg(long, default_value = "alice")]
        user: String,
        /// Session id (`session_id`): continue that conversation. Default: a new one each time
        /// (a session's level only rises, so a conversation that read confidential data stays so).
        #[arg(long)]
        session: Option<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
    },
}

fn config_path(path: Option<PathBuf>) -> Option<PathBuf> {
    path.or_else(|| {
        std::path::Path::new("config.yaml")
            .exists()
            .then(|| "config.yaml".into())
    })
}

/// The configuration at `path` (or `./config.yaml`), else the one `project` was built with.
fn load_config(project: &Project, path: Option<PathBuf>) -> anyhow::Result<Config> {
    Ok(match config_path(path) {
        Some(p) => Config::load(Some(&p))?,
        None => Config::parse(
            project.embedded_config(),
            "config.yaml (embedded)",
            &bulkhead::config::env_lookup,
        )?,
    })
}

/// Runs the command line of the project whose generated code declares `project` (a project's
/// `src/main.rs` is `bulkhead::cli::main(&servers::PROJECT)`).
pub fn main(project: &'static Project) -> ExitCode {
    // A jail's forwarder starts before anything else of the command line: no configuration,
    // no runtime, no logging (it runs inside a jail; see `jail::forward`).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(bulkhead::jail::forward::ARG) {
        let code = bulkhead::jail::forward::main(&args[1..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    #[cfg(feature = "failpoints")]
    bulkhead::failpoints::setup();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BULKHEAD_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check {
            root,
            against,
            base_generated,
        } => check::run(
            &root,
            cli.config.as_deref(),
            against.as_deref(),
            base_generated.as_deref(),
        ),
        Command::Mcp { action, root } => mcp::run(&root, action),
        Command::Import { what, root } => import::run(&root, what),
        Command::Up {
            deployment,
            unisolated: false,
            ..
        } => up::run(project, cli.config, &deployment),
        Command::Up {
            deployment,
            unisolated: true,
            port,
        } => up::run_unisolated(project, cli.config, &deployment, port),
        Command::Serve {
            server,
            transport,
            listen,
            forward,
            mode,
            allow_hosts,
            unisolated,
        } => load_config(project, cli.config).and_then(|mut c| {
            c.http.allowed_hosts.extend(allow_hosts);
            serve::run(
                project,
                &c,
                serve::ServeArgs {
                    server,
                    stdio: matches!(transport, Transport::Stdio),
                    listen,
                    forward,
                    mode,
                    unisolated,
                },
            )
            .map(|()| ExitCode::SUCCESS)
        }),
        Command::Connect {
            server,
            url,
            url_proxied,
            url_isolated,
            device,
        } => load_config(project, cli.config).and_then(|c| {
            connect::run(
                &c,
                connect::ConnectArgs {
                    server,
                    url,
                    url_proxied,
                    url_isolated,
                    device,
                },
            )
            .map(|()| ExitCode::SUCCESS)
        }),
        Command::Relay {
            routes,
            tunnel_accept,
            tunnel_dial,
            tunnel_dial_store,
            store_url_file,
            tunnel_idle,
            max_connections,
            idle_timeout_s,
        } => relay::run(
            relay::Routes {
                routes,
                tunnel_accept,
                tunnel_dial,
                tunnel_dial_store,
                store_url_file,
                tunnel_idle,
            },
            max_connections,
            idle_timeout_s,
        )
        .map(|()| ExitCode::SUCCESS),
        Command::Demo => {
            let path = config_path(cli.config.clone());
            load_config(project, cli.config)
                .and_then(|c| demo::run(project, path, &c).map(|()| ExitCode::SUCCESS))
        }
        Command::New { what, root } => new::run(&root, what),
        Command::Init {
            dir,
            engine_path,
            engine_git,
            engine_rev,
            engine_version,
        } => {
            let source = match (engine_path, engine_git, engine_version) {
                (Some(p), _, _) => Some(init::EngineSource::Path(p)),
                (_, Some(url), _) => Some(init::EngineSource::Git {
                    url,
                    rev: engine_rev,
                }),
                (_, _, Some(v)) => Some(init::EngineSource::Version(v)),
                _ => None,
            };
            init::run(&dir, source)
        }
        Command::Dev {
            server,
            root,
            listen,
            build,
            exe,
            max_rebuilds,
        } => {
            let exe = match exe {
                Some(exe) => exe,
                None => match std::env::current_exe() {
                    Ok(exe) => exe,
                    Err(e) => {
                        eprintln!("error: this program's path: {e}");
                        return ExitCode::FAILURE;
                    }
                },
            };
            let mut serve_args = vec!["--listen".to_string(), listen];
            if let Some(c) = &cli.config {
                serve_args.splice(0..0, ["--config".to_string(), c.display().to_string()]);
            }
            dev::run(dev::DevArgs {
                root,
                server,
                serve_args,
                build: build.split_whitespace().map(str::to_string).collect(),
                exe,
                max_rebuilds,
            })
        }
        Command::Tools { server, root } => tools::run(project, &root, server.as_deref()),
        Command::State { action } => {
            load_config(project, cli.config).and_then(|c| state::run(project, &c, action))
        }
        Command::Audit { action } => {
            load_config(project, cli.config).and_then(|c| audit::run(project, &c, action))
        }
        Command::Token { user, session, ttl } => load_config(project, cli.config).and_then(|c| {
            token::run(&c, &user, session.as_deref(), ttl).map(|()| ExitCode::SUCCESS)
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A positioned config diagnostic is already rendered like rustc (`error: … --> file`).
            match e.downcast_ref::<bulkhead::config::ConfigError>() {
                Some(c @ bulkhead::config::ConfigError::Invalid { .. }) => eprintln!("{c}"),
                _ => eprintln!("error: {e:#}"),
            }
            ExitCode::FAILURE
        }
    }
}
