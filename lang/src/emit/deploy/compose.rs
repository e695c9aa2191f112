//! `compose/<deployment>.yaml`: one service per instance a server needs, the egress proxy of its
//! proxied instance, the networks that separate them, and the volumes, variables and secrets the
//! instances need to run their tools.
//!
//! Isolation the instance can check on every engine: the full instance joins the internal
//! `agents` network and `egress`; the proxied and isolated instances run with
//! `network_mode: none` (loopback only, so their route self-check means the same on Docker
//! before 25, which gives `internal` networks a default route, on Docker 25+ and on podman). Each
//! serves on a Unix socket in a volume it shares only with its relay (`bulkhead relay`), which
//! joins `agents` under the instance's name and copies bytes to the socket. A proxied instance
//! reaches its egress proxy through a loopback port it forwards to a second socket in that volume;
//! the relay connects that socket to the squid service and to nothing else.
//!
//! Start order: an isolated instance before its relay (the relay waits for it to be healthy);
//! the instances themselves start in any order (the store's first start is safe for that).
//!
//! Data follows the same order. Each instance writes workspaces to its own volume and mounts the
//! volumes of less isolated instances read-only (a session that moved up keeps its files); no
//! instance mounts a more isolated one's workspaces. Connector data is mounted only into the
//! instances that run a tool using it (read-only unless a tool writes through it).

use super::{
    CONFIG_PATH, EGRESS_FORWARD, EGRESS_SOCKET, NetworkMode, PROXY_POLICY_PATH, PROXY_PORT,
    SECRETS_DIR, SERVE_SOCKET, SOCKET_DIR, STATE_DIR, ServerPlan, WORKSPACES_DIR, plan,
};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use bulkhead_vocab::workspace_layer;
use serde_json::{Map, Value, json};

/// The network where the agent and every instance meet (no route out).
pub const AGENTS_NET: &str = "agents";
/// The one network with a route out (full instances and egress proxies).
pub const EGRESS_NET: &str = "egress";
/// Named volume of the compliance state and audit log (shared: the ratchet spans instances).
pub const COMPLIANCE_VOLUME: &str = "compliance";
/// The compose secret holding the development signing key.
pub const DEV_SECRET: &str = "bulkhead_dev_secret";

/// The workspace volume written by `server`'s instance in `mode`.
pub fn workspace_volume(server: &str, mode: NetworkMode) -> String {
    format!("{server}-ws-{}", mode.as_str())
}

/// The socket volume an instance without network shares with its relay.
pub fn socket_volume(server: &str, mode: NetworkMode) -> String {
    format!("{server}-sock-{}", mode.as_str())
}

/// Adds `compose/<deployment>.yaml`.
pub fn emit(model: &Model, d: &Deployment, out: &mut Output) {
    let plans = plan(model, d);
    let mut services = Map::new();
    let mut networks = Map::new();
    let mut volumes = Map::new();
    let mut secrets = Map::new();
    networks.insert(AGENTS_NET.into(), json!({ "internal": true }));
    networks.insert(EGRESS_NET.into(), json!({ "driver": "bridge" }));
    volumes.insert(COMPLIANCE_VOLUME.into(), json!({}));
    secrets.insert(
        DEV_SECRET.into(),
        json!({ "file": "${BULKHEAD_DEV_SECRET_FILE:-../../secrets/bulkhead_dev_secret}" }),
    );
    for p in &plans {
        for inst in &p.instances {
            services.insert(inst.service.clone(), instance(d, p, inst.mode));
            volumes.insert(workspace_volume(&p.server.name, inst.mode), json!({}));
            if let Some(relay_name) = p.relay_service(inst.mode) {
                services.insert(relay_name, relay(d, p, inst.mode));
                volumes.insert(socket_volume(&p.server.name, inst.mode), json!({}));
            }
        }
        for s in &p.secrets {
            secrets.insert(
                s.name.clone(),
                json!({ "file": format!("${{{}_FILE:-../../secrets/{}}}", s.var, s.name) }),
            );
        }
        if let Some(proxy) = p.proxy_service() {
            services.insert(proxy, egress_proxy(d, p));
        }
    }
    let doc = json!({
        "services": services,
        "networks": networks,
        "volumes": volumes,
        "secrets": secrets,
    });
    let mut text = header("#", &[&d.source]);
    text.push_str(&format!(
        "# Deployment `{}`: run from this folder with `docker compose -f {}.yaml up`.\n\
         # Put the signing key (and each connector secret) in ../../secrets/<name> first.\n\
         # Instances serve one server each in one network mode; see {}.md for what runs where.\n",
        d.name, d.name, d.name
    ));
    text.push_str(&to_yaml(&doc));
    out.add(format!("compose/{}.yaml", d.name), text);
}

fn instance(d: &Deployment, p: &ServerPlan, mode: NetworkMode) -> Value {
    let port = p.server.port;
    let mut env = Map::new();
    env.insert("BULKHEAD_STATE_DIR".into(), json!(STATE_DIR));
    env.insert("BULKHEAD_WORKSPACES".into(), json!(WORKSPACES_DIR));
    for (var, default) in [
        ("BULKHEAD_ENV", "development"),
        ("BULKHEAD_ISSUER", "bulkhead-dev"),
        ("BULKHEAD_AUDIENCE", "bulkhead"),
        ("BULKHEAD_LOG", "warn"),
    ] {
        env.insert(var.into(), json!(format!("${{{var}:-{default}}}")));
    }
    env.insert(
        "BULKHEAD_DEV_SECRET_FILE".into(),
        json!(format!("{SECRETS_DIR}/{DEV_SECRET}")),
    );
    // One level per agent session across the servers of this domain.
    env.insert("BULKHEAD_TRUST_DOMAIN".into(), json!(p.server.trust_domain));
    let mut service_secrets = vec![json!(DEV_SECRET)];
    for v in p.env.iter().filter(|v| ServerPlan::reaches(mode, v.from)) {
        env.insert(v.name.clone(), json!(v.value));
    }
    for m in p.data.iter().filter(|m| ServerPlan::reaches(mode, m.from)) {
        if let Some(var) = &m.var {
            env.insert(var.clone(), json!(m.target));
        }
    }
    for s in p
        .secrets
        .iter()
        .filter(|s| ServerPlan::reaches(mode, s.from))
    {
        env.insert(
            format!("{}_FILE", s.var),
            json!(format!("{SECRETS_DIR}/{}", s.name)),
        );
        service_secrets.push(json!(s.name));
    }
    if mode.uses_proxy() {
        let proxy = format!("http://{EGRESS_FORWARD}");
        for var in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            env.insert(var.into(), json!(proxy));
        }
        for var in ["NO_PROXY", "no_proxy"] {
            env.insert(var.into(), json!("localhost"));
        }
    }
    let listen = match mode {
        NetworkMode::Full => format!("0.0.0.0:{port}"),
        NetworkMode::Proxied | NetworkMode::None => format!("unix:{SERVE_SOCKET}"),
    };
    let mut command = vec![
        json!("serve"),
        json!(p.server.name),
        json!("--listen"),
        json!(listen),
        json!("--mode"),
        json!(mode.as_str()),
    ];
    if mode.uses_proxy() {
        command.push(json!("--forward"));
        command.push(json!(format!("{EGRESS_FORWARD}=unix:{EGRESS_SOCKET}")));
    }
    command.extend([json!("--config"), json!(CONFIG_PATH)]);
    let mut svc = json!({
        "image": d.image.reference(),
        "build": build("Dockerfile"),
        "command": command,
        "environment": env,
    });
    if !mode.is_isolated() {
        svc["networks"] = json!([AGENTS_NET, EGRESS_NET]);
        // Desktop clients on this machine reach the full instance; agents use `agents`.
        svc["ports"] = json!([format!("127.0.0.1:{port}:{port}")]);
    } else {
        // Loopback only, on every engine: the relay is the one way in (and, for proxied, out).
        svc["network_mode"] = json!("none");
    }
    svc["secrets"] = json!(service_secrets);
    let mut mounts = Vec::new();
    for lower in NetworkMode::ALL.into_iter().filter(|m| *m <= mode) {
        if p.instance(lower).is_none() {
            continue;
        }
        let ro = if lower == mode { "" } else { ":ro" };
        mounts.push(json!(format!(
            "{}:{WORKSPACES_DIR}/{}{ro}",
            workspace_volume(&p.server.name, lower),
            workspace_layer(&p.server.name, lower)
        )));
    }
    mounts.push(json!(format!("{COMPLIANCE_VOLUME}:{STATE_DIR}")));
    if mode.is_isolated() {
        mounts.push(json!(format!(
            "{}:{SOCKET_DIR}",
            socket_volume(&p.server.name, mode)
        )));
    }
    mounts.push(json!(format!("../config/{}.yaml:{CONFIG_PATH}:ro", d.name)));
    for m in p.data.iter().filter(|m| ServerPlan::reaches(mode, m.from)) {
        let ro = if m.read_only { ":ro" } else { "" };
        mounts.push(json!(format!("{}:{}{ro}", m.source, m.target)));
    }
    svc["volumes"] = json!(mounts);
    harden(&mut svc);
    if p.sandbox {
        // Docker's default profile refuses the user namespace bubblewrap makes; the jail
        // installs its own, narrower filter on the code it runs (see docs/sandbox.md, "Deployments").
        svc["security_opt"] = json!(["no-new-privileges:true", "seccomp=unconfined"]);
    }
    let probe = match mode {
        NetworkMode::Full => vec![format!("http://127.0.0.1:{port}/healthz")],
        NetworkMode::Proxied | NetworkMode::None => vec![
            "--unix-socket".to_string(),
            SERVE_SOCKET.to_string(),
            "http://localhost/healthz".to_string(),
        ],
    };
    svc["healthcheck"] = healthcheck(probe);
    svc
}

/// The image build of every Bulkhead service: base images are build arguments with these
/// defaults, so a team behind a registry mirror overrides them without editing this file.
fn build(dockerfile: &str) -> Value {
    json!({ "context": "../..", "dockerfile": format!("generated/docker/{dockerfile}") })
}

/// `curl` against `/healthz` (arguments after the fixed ones), every 10 s.
fn healthcheck(probe: Vec<String>) -> Value {
    let mut test = vec![
        "CMD".to_string(),
        "curl".to_string(),
        "-fsS".to_string(),
        "--noproxy".to_string(),
        "*".to_string(),
        "-o".to_string(),
        "/dev/null".to_string(),
    ];
    test.extend(probe);
    json!({
        "test": test,
        "interval": "10s",
        "timeout": "3s",
        "retries": 3,
        "start_period": "5s",
    })
}

/// The relay of the instance in `mode`: on `agents` under the instance's name (so agents use
/// `http://<instance>:<port>/mcp` as before), published on 127.0.0.1 for desktop clients, and
/// for a proxied instance the one way from its egress socket to the squid service.
fn relay(d: &Deployment, p: &ServerPlan, mode: NetworkMode) -> Value {
    let port = p.server.port;
    let instance = p
        .instance(mode)
        .map(|i| i.service.clone())
        .unwrap_or_default();
    let mut command = vec![
        json!("relay"),
        json!("--route"),
        json!(format!("0.0.0.0:{port}=unix:{SERVE_SOCKET}")),
    ];
    let mut depends = Map::new();
    depends.insert(instance.clone(), json!({ "condition": "service_healthy" }));
    if let Some(proxy) = p.proxy_service().filter(|_| mode.uses_proxy()) {
        command.push(json!("--route"));
        command.push(json!(format!("unix:{EGRESS_SOCKET}={proxy}:{PROXY_PORT}")));
        depends.insert(proxy, json!({ "condition": "service_started" }));
    }
    let mut networks = Map::new();
    networks.insert(AGENTS_NET.into(), json!({ "aliases": [instance] }));
    // `egress` reaches the squid service and lets the engine publish the port on the host; the
    // relay copies bytes along the routes above and nothing else.
    networks.insert(EGRESS_NET.into(), json!({}));
    let mut svc = json!({
        "image": d.image.reference(),
        "build": build("Dockerfile"),
        "command": command,
        "networks": networks,
        "ports": [format!("127.0.0.1:{}:{port}", p.host_port(mode))],
        "depends_on": depends,
        "volumes": [format!("{}:{SOCKET_DIR}", socket_volume(&p.server.name, mode))],
    });
    harden(&mut svc);
    svc["healthcheck"] = healthcheck(vec![format!("http://127.0.0.1:{port}/healthz")]);
    svc
}

fn egress_proxy(d: &Deployment, p: &ServerPlan) -> Value {
    let mut svc = json!({
        "image": d.proxy_image.reference(),
        "build": build("Dockerfile.proxy"),
        "networks": [EGRESS_NET],
        "volumes": [format!(
            "../proxy/{}-{}.squid.conf:{PROXY_POLICY_PATH}:ro",
            d.name, p.server.name
        )],
    });
    harden(&mut svc);
    svc["healthcheck"] = json!({
        "test": ["CMD", "bash", "-c", format!("exec 3<>/dev/tcp/127.0.0.1/{PROXY_PORT}")],
        "interval": "10s",
        "timeout": "3s",
        "retries": 3,
        "start_period": "5s",
    });
    svc
}

/// Read-only root, no capabilities, no privilege gain, restarted unless stopped.
fn harden(svc: &mut Value) {
    svc["read_only"] = json!(true);
    svc["tmpfs"] = json!(["/tmp"]);
    svc["cap_drop"] = json!(["ALL"]);
    svc["security_opt"] = json!(["no-new-privileges:true"]);
    svc["restart"] = json!("unless-stopped");
}
