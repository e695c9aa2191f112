//! `compose/<deployment>.yaml`: one service per instance a server needs, the egress proxy of its
//! proxied instance, the networks that separate them, and the volumes, variables and secrets the
//! instances need to run their tools.
//!
//! Isolation comes from networks, never `network_mode: none` (which makes an HTTP server
//! unreachable): every instance joins the internal `agents` network where the agent meets it;
//! only the full instance also joins `egress`; the proxied instance shares an internal network
//! with its proxy, which alone is on both that network and `egress`.
//!
//! Data follows the same order. Each instance writes workspaces to its own volume and mounts the
//! volumes of less isolated instances read-only (a session that moved up keeps its files); no
//! instance mounts a more isolated one's workspaces. Connector data is mounted only into the
//! instances that run a tool using it (read-only unless a tool writes through it).

use super::{
    CONFIG_PATH, IMAGE, Mode, PROXY_IMAGE, PROXY_POLICY_PATH, PROXY_PORT, SECRETS_DIR, STATE_DIR,
    ServerPlan, WORKSPACES_DIR, plan,
};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
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
pub fn workspace_volume(server: &str, mode: Mode) -> String {
    format!("{server}-ws-{}", mode.as_str())
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
        }
        for s in &p.secrets {
            secrets.insert(
                s.name.clone(),
                json!({ "file": format!("${{{}_FILE:-../../secrets/{}}}", s.var, s.name) }),
            );
        }
        if let Some(proxy) = p.proxy_service() {
            services.insert(proxy, egress_proxy(d, p));
            networks.insert(p.proxied_net(), json!({ "internal": true }));
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

fn instance(d: &Deployment, p: &ServerPlan, mode: Mode) -> Value {
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
    let mut networks = vec![json!(AGENTS_NET)];
    match mode {
        Mode::Full => networks.push(json!(EGRESS_NET)),
        Mode::Proxied => {
            networks.push(json!(p.proxied_net()));
            let proxy = format!(
                "http://{}:{PROXY_PORT}",
                p.proxy_service().unwrap_or_default()
            );
            for var in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                env.insert(var.into(), json!(proxy));
            }
            for var in ["NO_PROXY", "no_proxy"] {
                env.insert(var.into(), json!("localhost,127.0.0.1"));
            }
        }
        Mode::None => {}
    }
    let mut svc = json!({
        "image": IMAGE,
        "build": { "context": "../..", "dockerfile": "generated/docker/Dockerfile" },
        "command": [
            "serve", p.server.name, "--listen", format!("0.0.0.0:{port}"),
            "--mode", mode.as_str(), "--config", CONFIG_PATH,
        ],
        "environment": env,
        "networks": networks,
        "secrets": service_secrets,
    });
    if mode == Mode::Full {
        // Desktop clients on this machine reach the full instance; agents use `agents`.
        svc["ports"] = json!([format!("127.0.0.1:{port}:{port}")]);
    }
    if let Some(proxy) = p.proxy_service().filter(|_| mode == Mode::Proxied) {
        svc["depends_on"] = json!([proxy]);
    }
    let mut mounts = Vec::new();
    for lower in Mode::ALL.into_iter().filter(|m| *m <= mode) {
        if p.instance(lower).is_none() {
            continue;
        }
        let ro = if lower == mode { "" } else { ":ro" };
        mounts.push(json!(format!(
            "{}:{WORKSPACES_DIR}/{}{ro}",
            workspace_volume(&p.server.name, lower),
            lower.workspace_folder(&p.server.name)
        )));
    }
    mounts.push(json!(format!("{COMPLIANCE_VOLUME}:{STATE_DIR}")));
    mounts.push(json!(format!("../config/{}.yaml:{CONFIG_PATH}:ro", d.name)));
    for m in p.data.iter().filter(|m| ServerPlan::reaches(mode, m.from)) {
        let ro = if m.read_only { ":ro" } else { "" };
        mounts.push(json!(format!("{}:{}{ro}", m.source, m.target)));
    }
    svc["volumes"] = json!(mounts);
    harden(&mut svc);
    svc["healthcheck"] = json!({
        "test": ["CMD", "curl", "-fsS", "--noproxy", "*", "-o", "/dev/null",
                 format!("http://127.0.0.1:{port}/healthz")],
        "interval": "10s",
        "timeout": "3s",
        "retries": 3,
        "start_period": "5s",
    });
    svc
}

fn egress_proxy(d: &Deployment, p: &ServerPlan) -> Value {
    let mut networks = Map::new();
    networks.insert(p.proxied_net(), json!({}));
    networks.insert(EGRESS_NET.into(), json!({}));
    let mut svc = json!({
        "image": PROXY_IMAGE,
        "build": { "context": "../..", "dockerfile": "generated/docker/Dockerfile.proxy" },
        "networks": networks,
        "volumes": [format!(
            "../proxy/{}-{}.squid.conf:{PROXY_POLICY_PATH}:ro",
            d.name, p.server.name
        )],
    });
    harden(&mut svc);
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
