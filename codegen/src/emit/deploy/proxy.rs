//! `proxy/<deployment>-<server>.yaml`: the Envoy (v3, static) configuration of a proxied
//! instance's egress proxy. Deny by default; allows exactly the deployment's `proxied_egress`.

use super::{Allowed, PROXY_PORT, ServerPlan, plan};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::Deployment;
use serde_json::{Value, json};

const HCM: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const ROUTER: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
const TCP_PROXY: &str =
    "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";

const EXPLAIN: &str = "\
# Egress proxy of the proxied instance: everything not listed here is refused.
# - One HTTP listener on :3128 (the instance's HTTP_PROXY/HTTPS_PROXY). Virtual hosts match the
#   request's :authority exactly, port included: `CONNECT host:port` is tunnelled and plain HTTP
#   (absolute-form) is forwarded only for the allowlisted `host:port` pairs (an entry on port 80
#   also matches the bare host). Any other authority, CONNECT or not, gets 403.
# - One TCP listener per allowlisted non-HTTP port (ports other than 80/443 used by one host), so
#   clients that ignore HTTP_PROXY still pass here: in the proxied instance those names resolve
#   to this proxy (compose `extra_hosts`), and each listener forwards to its one host only.
# - No admin listener (there is no `admin:` block).
# - Metadata and gateway addresses: the only upstreams are the STRICT_DNS clusters below, one
#   per allowlist entry; there is no dynamic forward proxy and no original-destination cluster,
#   so a client cannot name 169.254.169.254, fd00:ec2::254, the Docker gateway or any other
#   address. Clusters resolve IPv4 only (fd00:ec2::254 is never dialled), and `bulkhead check`
#   refuses loopback, link-local, unspecified and multicast IP literals in the allowlist. Envoy
#   has no filter on the *resolved* upstream address (an RBAC network filter sees only the
#   downstream connection), so a listed name whose DNS answer is a link-local or gateway
#   address would be reached: drop 169.254.0.0/16 and the host's bridge addresses in the host
#   firewall for defence in depth.
";

/// Adds one proxy config per proxied instance of `d`.
pub fn emit(d: &Deployment, out: &mut Output) {
    for p in plan(d) {
        if p.proxy_service().is_none() {
            continue;
        }
        let mut text = header("#", &[&d.source]);
        text.push_str(EXPLAIN);
        text.push_str(&to_yaml(&config(&p)));
        out.add(format!("proxy/{}-{}.yaml", d.name, p.server.name), text);
    }
}

/// The Envoy bootstrap for one server's proxy.
pub fn config(p: &ServerPlan) -> Value {
    let mut listeners = vec![http_listener(&p.allowed)];
    listeners.extend(p.tcp_forwards().into_iter().map(tcp_listener));
    let clusters: Vec<Value> = p.allowed.iter().map(cluster).collect();
    json!({ "static_resources": { "listeners": listeners, "clusters": clusters } })
}

fn socket(address: &str, port: u16) -> Value {
    json!({ "socket_address": { "address": address, "port_value": port } })
}

fn http_listener(allowed: &[Allowed]) -> Value {
    let mut vhosts: Vec<Value> = allowed
        .iter()
        .map(|a| {
            let mut domains = vec![a.authority()];
            if a.port == 80 {
                domains.push(a.host.clone());
            }
            json!({
                "name": a.cluster(),
                "domains": domains,
                "routes": [
                    { "match": { "connect_matcher": {} },
                      "route": { "cluster": a.cluster(),
                                 "upgrade_configs": [{ "upgrade_type": "CONNECT", "connect_config": {} }] } },
                    { "match": { "prefix": "/" }, "route": { "cluster": a.cluster() } },
                ],
            })
        })
        .collect();
    let denied = json!({ "status": 403, "body": { "inline_string": "bulkhead egress proxy: destination not in the allowlist\n" } });
    vhosts.push(json!({
        "name": "deny_everything_else",
        "domains": ["*"],
        "routes": [
            { "match": { "connect_matcher": {} }, "direct_response": denied },
            { "match": { "prefix": "/" }, "direct_response": denied },
        ],
    }));
    json!({
        "name": "http_proxy",
        "address": socket("0.0.0.0", PROXY_PORT),
        "filter_chains": [{ "filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": HCM,
                "stat_prefix": "egress_http",
                "http_protocol_options": { "allow_absolute_url": true },
                "upgrade_configs": [{ "upgrade_type": "CONNECT" }],
                "route_config": { "name": "allowlist", "virtual_hosts": vhosts },
                "http_filters": [{ "name": "envoy.filters.http.router", "typed_config": { "@type": ROUTER } }],
            },
        }]}],
    })
}

fn tcp_listener(a: &Allowed) -> Value {
    json!({
        "name": format!("tcp_{}", a.cluster()),
        "address": socket("0.0.0.0", a.port),
        "filter_chains": [{ "filters": [{
            "name": "envoy.filters.network.tcp_proxy",
            "typed_config": { "@type": TCP_PROXY, "stat_prefix": format!("tcp_{}", a.cluster()), "cluster": a.cluster() },
        }]}],
    })
}

fn cluster(a: &Allowed) -> Value {
    json!({
        "name": a.cluster(),
        "type": "STRICT_DNS",
        "dns_lookup_family": "V4_ONLY",
        "connect_timeout": "5s",
        "load_assignment": {
            "cluster_name": a.cluster(),
            "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": socket(&a.host, a.port) } }] }],
        },
    })
}
