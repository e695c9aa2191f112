//! Deployment emitters: compose files, egress-proxy configs, runtime configs, client entries,
//! topology diagrams and the server image's Dockerfile. All read the model's deployments only.
//!
//! One plan per deployed server decides which instances exist (from the highest sensitivity
//! its tools reach) and what the proxied instance may reach; every emitter renders that plan.

pub mod clients;
pub mod compose;
pub mod config;
pub mod diagram;
pub mod docker;
pub mod kubernetes;
pub mod local;
pub mod proxy;

use super::Output;
use crate::model::{Connector, DeployedServer, Deployment, Model, Server, Target};
use crate::spec::{ConnectorKind, Permission, Sensitivity};
use crate::vars;
use bulkhead_vocab::{HostPort, NetworkMode};
use serde_json::json;
use std::collections::BTreeMap;

/// Port of the egress proxy (`HTTP_PROXY`/`HTTPS_PROXY`: plain HTTP and CONNECT).
pub const PROXY_PORT: u16 = 3128;
/// Where workspaces live in every instance (one folder per server and mode beneath).
pub const WORKSPACES_DIR: &str = "/var/lib/bulkhead/workspaces";
/// Where compliance state and the audit log live in every instance (not under the workspaces).
pub const STATE_DIR: &str = "/var/lib/bulkhead/state";
/// Where connector data (databases, log folders, CA files) is mounted, one folder per connector.
pub const DATA_DIR: &str = "/var/lib/bulkhead/data";
/// Where compose mounts secrets (read by the runtime through `<VAR>_FILE`).
pub const SECRETS_DIR: &str = "/run/secrets";
/// Where the runtime configuration is mounted.
pub const CONFIG_PATH: &str = "/etc/bulkhead/config.yaml";
/// Where a `network_mode: none` instance and its relay share Unix sockets (a volume per instance).
pub const SOCKET_DIR: &str = "/run/bulkhead/sock";
/// The socket an isolated instance serves HTTP on (in [`SOCKET_DIR`]).
pub const SERVE_SOCKET: &str = "/run/bulkhead/sock/serve.sock";
/// The socket the relay of a proxied instance accepts egress on (to the squid service).
pub const EGRESS_SOCKET: &str = "/run/bulkhead/sock/egress.sock";
/// Where an isolated Kubernetes pod's relay serves the state store's socket (`.s.PGSQL.5432`).
pub const STORE_SOCKET: &str = "/run/bulkhead/sock/.s.PGSQL.5432";
/// The port an isolated Kubernetes pod's relay accepts store tunnels on.
pub const TUNNEL_PORT: u16 = 5433;
/// How an isolated Kubernetes pod's server runs: in a user and network namespace of its own
/// (bubblewrap; only loopback), since a pod's containers share one network namespace.
pub const OWN_NETWORK: [&str; 9] = [
    "bwrap",
    "--unshare-user",
    "--unshare-net",
    "--die-with-parent",
    "--dev-bind",
    "/",
    "/",
    "--",
    "/usr/local/bin/bulkhead",
];
/// Where a proxied instance with no network finds its egress proxy: a loopback port it forwards
/// to [`EGRESS_SOCKET`] itself (`serve --forward`).
pub const EGRESS_FORWARD: &str = "127.0.0.1:3128";
/// The user every Bulkhead container runs as.
pub const UID: u32 = 10001;
/// The user the egress proxy container runs as.
pub const PROXY_UID: u32 = 10002;
/// Where the egress proxy image reads the generated policy.
pub const PROXY_POLICY_PATH: &str = "/etc/squid/policy.conf";

/// One running instance of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Compose service name (also its host name on the `agents` network).
    pub service: String,
    /// Network mode.
    pub mode: NetworkMode,
}

/// Where one tool runs: every instance from the least isolated mode its sensitivity allows.
#[derive(Clone, Debug)]
pub struct Placement {
    /// Tool name.
    pub tool: String,
    /// Its permission.
    pub permission: Permission,
    /// Its declared sensitivity.
    pub sensitivity: Sensitivity,
    /// `connector.operation`, `handler` or `text`.
    pub runs: String,
    /// The least isolated mode that runs it.
    pub from: NetworkMode,
}

/// One file or folder of connector data mounted into the instances that run its tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataMount {
    /// Connector name.
    pub connector: String,
    /// The setting that names it (`path`, `dir`, `ca_file`).
    pub setting: &'static str,
    /// Host side: a compose expression (`${VAR:-../../default}`) or a path.
    pub source: String,
    /// Where the instance sees it.
    pub target: String,
    /// The variable the instance reads the path from (set to `target`), if the setting is one.
    pub var: Option<String>,
    /// Mounted read-only (nothing writes through the connector).
    pub read_only: bool,
    /// The least isolated mode whose instance mounts it.
    pub from: NetworkMode,
}

/// One variable an instance needs from the deployment's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// The compose value: the spec's own expression (same default or message).
    pub value: String,
    /// The least isolated mode whose instance needs it.
    pub from: NetworkMode,
}

/// One credential passed as a compose secret (a file at `/run/secrets/<name>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretVar {
    /// The variable the connector reads (the runtime reads `<var>_FILE` when `<var>` is unset).
    pub var: String,
    /// The compose secret's name (the variable in lowercase).
    pub name: String,
    /// The least isolated mode whose instance needs it.
    pub from: NetworkMode,
}

/// What a deployed server needs: its instances and its proxied allowlist.
#[derive(Clone, Debug)]
pub struct ServerPlan<'a> {
    /// The server as deployed.
    pub server: &'a DeployedServer,
    /// Position in the deployment (sorted by name), from 0.
    pub index: usize,
    /// Instances: full always, proxied from confidential, isolated from secret.
    pub instances: Vec<Instance>,
    /// The proxied allowlist, sorted and without repeats.
    pub allowed: Vec<HostPort>,
    /// Where each tool runs, by tool name.
    pub tools: Vec<Placement>,
    /// Connector data to mount, by connector and setting.
    pub data: Vec<DataMount>,
    /// Connector variables to pass (not data paths, not secrets), by name.
    pub env: Vec<EnvVar>,
    /// Connector credentials to pass as compose secrets, by variable.
    pub secrets: Vec<SecretVar>,
    /// Whether a tool runs a program in a jail (a `sandbox` connector, or an upstream MCP
    /// server launched over stdio): its instances need bubblewrap and a system-call profile
    /// that lets bubblewrap make namespaces.
    pub sandbox: bool,
    /// Whether a tool runs code in the sandbox (its image needs Python).
    pub code: bool,
    /// Upstream MCP servers launched over stdio by its instances, by connector name.
    pub upstreams: Vec<Upstream>,
    /// Connectors whose jails go out through a gate, with their own `egress`, by name.
    pub jail_egress: Vec<(String, Vec<HostPort>)>,
}

/// An upstream MCP server an image installs.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// The `mcp` connector.
    pub connector: String,
    /// Its package at the version its lock pins (none: the program is the operator's).
    pub package: Option<crate::model::Package>,
    /// The program its command starts when its variables keep their defaults.
    pub program: String,
}

impl<'a> ServerPlan<'a> {
    /// Plans one deployed server.
    pub fn new(model: &Model, server: &'a DeployedServer, index: usize) -> ServerPlan<'a> {
        let instances = NetworkMode::needed_for(server.max_sensitivity)
            .map(|mode| Instance {
                service: match mode {
                    NetworkMode::Full => server.name.clone(),
                    NetworkMode::Proxied => format!("{}-proxied", server.name),
                    NetworkMode::None => format!("{}-isolated", server.name),
                },
                mode,
            })
            .collect();
        let mut allowed: Vec<HostPort> = server.proxied_egress.clone();
        allowed.sort();
        allowed.dedup();
        let mut plan = ServerPlan {
            server,
            index,
            instances,
            allowed,
            tools: Vec::new(),
            data: Vec::new(),
            env: Vec::new(),
            secrets: Vec::new(),
            sandbox: false,
            code: false,
            upstreams: Vec::new(),
            jail_egress: Vec::new(),
        };
        if let Some(spec) = model.servers.iter().find(|s| s.name == server.name) {
            plan.place(model, spec);
        }
        plan
    }

    /// Fills `tools`, `data`, `env` and `secrets` from the server's tools and resources.
    fn place(&mut self, model: &Model, spec: &Server) {
        let tools = spec
            .tools
            .iter()
            .chain(spec.resources.iter().map(|r| &r.tool));
        // Per connector: the least isolated mode that uses it, and whether anything writes.
        let mut used: BTreeMap<&str, (NetworkMode, bool)> = BTreeMap::new();
        for t in tools {
            let from = t.sensitivity.required_mode();
            let runs = match &t.target {
                Target::Connector {
                    connector,
                    operation,
                } => {
                    let e = used.entry(connector.as_str()).or_insert((from, false));
                    e.0 = e.0.min(from);
                    e.1 |= t.permission == Permission::Write;
                    format!("{connector}.{operation}")
                }
                Target::Handler => "handler".to_string(),
                Target::Static(_) => "text".to_string(),
            };
            self.tools.push(Placement {
                tool: t.name.clone(),
                permission: t.permission,
                sensitivity: t.sensitivity,
                runs,
                from,
            });
        }
        self.tools.sort_by(|a, b| a.tool.cmp(&b.tool));
        for (name, (from, writes)) in used {
            let Some(c) = model.connectors.iter().find(|c| c.name == name) else {
                continue;
            };
            self.sandbox |= c.settings.jails();
            if !c.egress.is_empty() {
                self.jail_egress.push((c.name.clone(), c.egress.clone()));
            }
            self.code |= c.kind == ConnectorKind::Sandbox;
            if let Some(program) = c.settings.launches() {
                // The program as it runs with its variables' defaults.
                let program = vars::with_defaults(program);
                self.upstreams.push(Upstream {
                    connector: c.name.clone(),
                    package: c.package.clone(),
                    program,
                });
            }
            let mut path_vars = Vec::new();
            for path in c.settings.data_paths() {
                let written = path.written;
                // An optional path (`${VAR:-}`): nothing to mount unless the operator sets it;
                // the variable passes through like any other.
                let optional = vars::references(&json!(written))
                    .first()
                    .is_some_and(|r| r.whole && r.default() == Some(""));
                if optional {
                    continue;
                }
                let mount = data_mount(c, path.setting, written, path.is_dir, !writes, from);
                path_vars.extend(mount.var.clone());
                self.data.push(mount);
            }
            for r in vars::references(&c.settings_json()) {
                if path_vars.contains(&r.name) {
                    continue;
                }
                if c.secrets.contains(&r.name) {
                    if !self.secrets.iter().any(|s| s.var == r.name) {
                        self.secrets.push(SecretVar {
                            name: r.name.to_ascii_lowercase(),
                            var: r.name.clone(),
                            from,
                        });
                    }
                    continue;
                }
                let value = if r.op.is_empty() {
                    format!("${{{}:?connector `{}` needs {}}}", r.name, c.name, r.name)
                } else {
                    r.written()
                };
                match self.env.iter_mut().find(|e| e.name == r.name) {
                    Some(e) => e.from = e.from.min(from),
                    None => self.env.push(EnvVar {
                        name: r.name.clone(),
                        value,
                        from,
                    }),
                }
            }
        }
        self.env.sort_by(|a, b| a.name.cmp(&b.name));
        self.secrets.sort_by(|a, b| a.var.cmp(&b.var));
    }

    /// Whether the instance in `mode` runs tools (or reads data) first allowed from `from`.
    pub fn reaches(mode: NetworkMode, from: NetworkMode) -> bool {
        from <= mode
    }

    /// The instance of `mode`, if the server needs one.
    pub fn instance(&self, mode: NetworkMode) -> Option<&Instance> {
        self.instances.iter().find(|i| i.mode == mode)
    }

    /// The connectors whose jails' requests the proxy labels, as its policy takes them.
    pub fn gated(&self) -> Vec<proxy::Gated<'_>> {
        self.jail_egress
            .iter()
            .map(|(connector, egress)| proxy::Gated { connector, egress })
            .collect()
    }

    /// The egress proxy's service name (present when there is a proxied instance).
    pub fn proxy_service(&self) -> Option<String> {
        self.instance(NetworkMode::Proxied)
            .map(|_| format!("{}-egress-proxy", self.server.name))
    }

    /// The relay that reaches the instance in `mode` (proxied and isolated instances have no
    /// network in compose: agents reach them through it).
    pub fn relay_service(&self, mode: NetworkMode) -> Option<String> {
        self.instance(mode)
            .filter(|i| i.mode.is_isolated())
            .map(|i| format!("{}-relay", i.service))
    }

    /// The host port (on 127.0.0.1) compose publishes the instance in `mode` on: `port` for full,
    /// the next ones for proxied and isolated (`bulkhead check` keeps servers' ranges apart).
    pub fn host_port(&self, mode: NetworkMode) -> u16 {
        let offset = self
            .instances
            .iter()
            .position(|i| i.mode == mode)
            .unwrap_or(0);
        self.server
            .port
            .saturating_add(u16::try_from(offset).unwrap_or(0))
    }
}

/// The mount of one data path setting. A setting that is one variable (`${VAR:-default}`)
/// is mounted from the same variable on the host (relative defaults resolved from the repository
/// root, two folders up from `generated/compose/`) and the instance gets `VAR=<target>`; a
/// literal path is mounted where the instance (working in `/var/lib/bulkhead`) will look.
fn data_mount(
    c: &Connector,
    setting: &'static str,
    written: &str,
    is_dir: bool,
    read_only: bool,
    from: NetworkMode,
) -> DataMount {
    let host = |p: &str| {
        if p.starts_with('/') {
            p.to_string()
        } else {
            format!("../../{}", p.trim_start_matches("./"))
        }
    };
    let refs = vars::references(&json!(written));
    match refs.first().filter(|r| r.whole) {
        Some(r) => {
            let default = r.default().unwrap_or("");
            let base = default
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .filter(|b| !b.is_empty() && !is_dir)
                .unwrap_or(if is_dir { "" } else { setting });
            let target = if is_dir {
                format!("{DATA_DIR}/{}", c.name)
            } else {
                format!("{DATA_DIR}/{}/{base}", c.name)
            };
            let source = if default.is_empty() {
                format!("${{{}:?connector `{}` needs {}}}", r.name, c.name, r.name)
            } else {
                format!("${{{}:-{}}}", r.name, host(default))
            };
            DataMount {
                connector: c.name.clone(),
                setting,
                source,
                target,
                var: Some(r.name.clone()),
                read_only,
                from,
            }
        }
        None => {
            let target = if written.starts_with('/') {
                written.to_string()
            } else {
                format!("/var/lib/bulkhead/{}", written.trim_start_matches("./"))
            };
            DataMount {
                connector: c.name.clone(),
                setting,
                source: host(written),
                target,
                var: None,
                read_only,
                from,
            }
        }
    }
}

/// Plans every server of a deployment.
pub fn plan<'a>(model: &Model, deployment: &'a Deployment) -> Vec<ServerPlan<'a>> {
    deployment
        .servers
        .iter()
        .enumerate()
        .map(|(i, s)| ServerPlan::new(model, s, i))
        .collect()
}

/// Adds every deployment artifact of `model` to `out`.
pub fn emit(model: &Model, out: &mut Output) {
    for d in &model.deployments {
        if d.targets.contains(&crate::spec::DeployTarget::Compose) {
            compose::emit(model, d, out);
            proxy::emit(model, d, out);
            config::emit(model, d, out);
            clients::emit(model, d, out);
            diagram::emit(model, d, out);
        }
        if d.targets.contains(&crate::spec::DeployTarget::Kubernetes) {
            kubernetes::emit(model, d, out);
        }
    }
    docker::emit(model, out);
}
