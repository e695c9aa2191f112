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
pub mod proxy;

use super::Output;
use crate::model::{DeployedServer, Deployment, Model};
use crate::spec::Sensitivity;

/// Port of the egress proxy's HTTP listener (`HTTP_PROXY`/`HTTPS_PROXY`).
pub const PROXY_PORT: u16 = 3128;
/// Ports reached through `HTTP_PROXY`/`HTTPS_PROXY` (plain HTTP and CONNECT) only; every other
/// allowlisted port also gets a TCP listener on the proxy.
pub const WEB_PORTS: [u16; 2] = [80, 443];
/// Where workspaces live in every instance.
pub const WORKSPACES_DIR: &str = "/var/lib/bulkhead/workspaces";
/// Where compliance state and the audit log live in every instance (not under the workspaces).
pub const STATE_DIR: &str = "/var/lib/bulkhead/state";
/// Where the runtime configuration is mounted.
pub const CONFIG_PATH: &str = "/etc/bulkhead/config.yaml";
/// The server image every instance runs.
pub const IMAGE: &str = "bulkhead:latest";
/// The egress proxy image, pinned.
pub const ENVOY_IMAGE: &str = "envoyproxy/envoy:v1.33.8";

/// The network mode of one instance (the runtime's `--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Full network.
    Full,
    /// Egress only through the proxy.
    Proxied,
    /// No egress at all.
    None,
}

impl Mode {
    /// The `--mode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Proxied => "proxied",
            Mode::None => "none",
        }
    }
}

/// One running instance of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Compose service name (also its host name on the `agents` network).
    pub service: String,
    /// Network mode.
    pub mode: Mode,
}

/// One `host:port` the proxied instance may reach.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Allowed {
    /// DNS name or IPv4 address, as written.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl Allowed {
    /// `host:port`, the `:authority` of a CONNECT request.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// A name usable in Envoy cluster and stat names.
    pub fn cluster(&self) -> String {
        let host: String = self
            .host
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("allow_{host}_{}", self.port)
    }
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
    pub allowed: Vec<Allowed>,
}

impl<'a> ServerPlan<'a> {
    /// Plans one deployed server.
    pub fn new(server: &'a DeployedServer, index: usize) -> ServerPlan<'a> {
        let mut instances = vec![Instance {
            service: server.name.clone(),
            mode: Mode::Full,
        }];
        if server.max_sensitivity >= Sensitivity::Confidential {
            instances.push(Instance {
                service: format!("{}-proxied", server.name),
                mode: Mode::Proxied,
            });
        }
        if server.max_sensitivity >= Sensitivity::Secret {
            instances.push(Instance {
                service: format!("{}-isolated", server.name),
                mode: Mode::None,
            });
        }
        let mut allowed: Vec<Allowed> = server
            .proxied_egress
            .iter()
            .filter_map(|entry| {
                let (host, port) = entry.rsplit_once(':')?;
                Some(Allowed {
                    host: host.to_string(),
                    port: port.parse().ok()?,
                })
            })
            .collect();
        allowed.sort();
        allowed.dedup();
        ServerPlan {
            server,
            index,
            instances,
            allowed,
        }
    }

    /// The instance of `mode`, if the server needs one.
    pub fn instance(&self, mode: Mode) -> Option<&Instance> {
        self.instances.iter().find(|i| i.mode == mode)
    }

    /// The egress proxy's service name (present when there is a proxied instance).
    pub fn proxy_service(&self) -> Option<String> {
        self.instance(Mode::Proxied)
            .map(|_| format!("{}-egress-proxy", self.server.name))
    }

    /// The internal network shared by the proxied instance and its proxy.
    pub fn proxied_net(&self) -> String {
        format!("{}-proxied-net", self.server.name)
    }

    /// Entries that get a TCP listener on the proxy (and resolve to the proxy in the proxied
    /// instance): ports other than 80/443 and the proxy port, used by exactly one host (a TCP
    /// listener cannot tell two hosts on one port apart; those are reachable by CONNECT only).
    pub fn tcp_forwards(&self) -> Vec<&Allowed> {
        self.allowed
            .iter()
            .filter(|a| !WEB_PORTS.contains(&a.port) && a.port != PROXY_PORT)
            .filter(|a| self.allowed.iter().filter(|b| b.port == a.port).count() == 1)
            .collect()
    }

    /// The fixed subnet and proxy address on the proxied network, needed only when TCP
    /// forwards exist (the proxied instance's `/etc/hosts` points their names at the proxy).
    pub fn proxy_address(&self) -> Option<(String, String)> {
        if self.instance(Mode::Proxied).is_none() || self.tcp_forwards().is_empty() {
            return None;
        }
        let octet = 16 + self.index % 200;
        Some((format!("10.231.{octet}.0/24"), format!("10.231.{octet}.2")))
    }
}

/// Plans every server of a deployment.
pub fn plan(deployment: &Deployment) -> Vec<ServerPlan<'_>> {
    deployment
        .servers
        .iter()
        .enumerate()
        .map(|(i, s)| ServerPlan::new(s, i))
        .collect()
}

/// Adds every deployment artifact of `model` to `out`.
pub fn emit(model: &Model, out: &mut Output) {
    for d in &model.deployments {
        compose::emit(d, out);
        proxy::emit(d, out);
        config::emit(d, out);
        clients::emit(d, out);
        diagram::emit(d, out);
    }
    docker::emit(model, out);
}
