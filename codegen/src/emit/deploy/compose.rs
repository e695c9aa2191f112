//! `compose/<deployment>.yaml`: one service per instance a server needs, the egress proxy of its
//! proxied instance, the networks that separate them and the named volumes they share.
//!
//! Isolation comes from networks, never `network_mode: none` (which makes an HTTP server
//! unreachable): every instance joins the internal `agents` network where the agent meets it;
//! only the full instance also joins `egress`; the proxied instance shares an internal network
//! with its proxy, which alone is on both that network and `egress`.

use super::{
    CONFIG_PATH, ENVOY_IMAGE, IMAGE, Mode, PROXY_PORT, STATE_DIR, ServerPlan, WORKSPACES_DIR, plan,
};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::Deployment;
use serde_json::{Map, Value, json};

/// The network where the agent and every instance meet (no route out).
pub const AGENTS_NET: &str = "agents";
/// The one network with a route out (full instances and egress proxies).
pub const EGRESS_NET: &str = "egress";
/// Named volume of the workspaces.
pub const WORKSPACES_VOLUME: &str = "workspaces";
/// Named volume of the compliance state and audit log.
pub const COMPLIANCE_VOLUME: &str = "compliance";

/// Adds `compose/<deployment>.yaml`.
pub fn emit(d: &Deployment, out: &mut Output) {
    let plans = plan(d);
    let mut services = Map::new();
    let mut networks = Map::new();
    networks.insert(AGENTS_NET.into(), json!({ "internal": true }));
    networks.insert(EGRESS_NET.into(), json!({ "driver": "bridge" }));
    for p in &plans {
        for inst in &p.instances {
            services.insert(inst.service.clone(), instance(d, p, inst.mode));
        }
        if let Some(proxy) = p.proxy_service() {
            services.insert(proxy, egress_proxy(d, p));
            let mut net = json!({ "internal": true });
            if let Some((subnet, _)) = p.proxy_address() {
                net["ipam"] = json!({ "config": [{ "subnet": subnet }] });
            }
            networks.insert(p.proxied_net(), net);
        }
    }
    let doc = json!({
        "services": services,
        "networks": networks,
        "volumes": { WORKSPACES_VOLUME: {}, COMPLIANCE_VOLUME: {} },
    });
    let mut text = header("#", &[&d.source]);
    text.push_str(&format!(
        "# Deployment `{}`: run from this folder with `docker compose -f {}.yaml up`.\n\
         # Instances serve one server each in one network mode; see {}.md for the topology.\n",
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
        ("BULKHEAD_DEV_SECRET", ""),
        ("BULKHEAD_LOG", "warn"),
    ] {
        env.insert(var.into(), json!(format!("${{{var}:-{default}}}")));
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
    });
    if mode == Mode::Full {
        // Desktop clients on this machine reach the full instance only; agents use `agents`.
        svc["ports"] = json!([format!("127.0.0.1:{port}:{port}")]);
    }
    if let (Mode::Proxied, Some((_, ip))) = (mode, p.proxy_address()) {
        // Names of TCP allowlist entries resolve to the proxy here only (the proxy itself
        // resolves them normally; an alias on its own network would make it dial itself).
        let hosts: Vec<String> = p
            .tcp_forwards()
            .iter()
            .map(|a| format!("{}:{ip}", a.host))
            .collect();
        svc["extra_hosts"] = json!(hosts);
    }
    if let Some(proxy) = p.proxy_service().filter(|_| mode == Mode::Proxied) {
        svc["depends_on"] = json!([proxy]);
    }
    svc["volumes"] = json!([
        format!("{WORKSPACES_VOLUME}:{WORKSPACES_DIR}"),
        format!("{COMPLIANCE_VOLUME}:{STATE_DIR}"),
        format!("../config/{}.yaml:{CONFIG_PATH}:ro", d.name),
    ]);
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
    let mut on_proxied = json!({});
    if let Some((_, ip)) = p.proxy_address() {
        on_proxied["ipv4_address"] = json!(ip);
    }
    let mut networks = Map::new();
    networks.insert(p.proxied_net(), on_proxied);
    networks.insert(EGRESS_NET.into(), json!({}));
    let mut svc = json!({
        "image": ENVOY_IMAGE,
        "command": ["envoy", "-c", "/etc/envoy/envoy.yaml", "--log-level", "warn"],
        "user": "101:101",
        "networks": networks,
        "volumes": [format!("../proxy/{}-{}.yaml:/etc/envoy/envoy.yaml:ro", d.name, p.server.name)],
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
