//! `kubernetes/<deployment>/`: plain manifests and a `kustomization.yaml` for a deployment that
//! opts in (`targets: [kubernetes]`), from the same plan as compose: one Deployment and Service per
//! instance, the egress proxy with the same squid policy, the runtime configuration, per-mode
//! workspace claims with the per-mode data rule, Secret *references* (never values), and
//! NetworkPolicies that give each mode exactly its way out:
//!
//! - every pod: nothing in or out (`default-deny`), except DNS (`dns`) for every pod but the
//!   `proxied` and `none` instances;
//! - every `full` instance and every store relay: the PostgreSQL state store on 5432
//!   (`state-store`); every instance: ingress from the agents' namespace on its port;
//! - `full`: the TCP ports of the deployment's `egress`, to any public address (a NetworkPolicy
//!   cannot name hosts);
//! - `proxied`: only its egress proxy on 3128 (by the address of the proxy's Service, which
//!   Kubernetes puts in the environment: no name lookup); the proxy alone reaches out, on the
//!   allowlist's ports, and squid checks the `host:port` pairs;
//! - `none`: no egress at all, DNS and the store included.
//!
//! A `proxied` or `none` pod runs its server in a user and network namespace of its own
//! (bubblewrap: only loopback; a pod's containers otherwise share one network namespace), as
//! compose runs it with `network_mode: none`: it serves on a Unix socket in an `emptyDir` and
//! resolves no name. A relay container beside it carries clients to that socket, a proxied
//! server's loopback forward to its proxy, and the server's store connections over *tunnels that
//! arrive*: a store relay (`<instance>-store-relay`, which may reach DNS and the store) dials into
//! the pod's port 5433 ahead of need (`bulkhead relay --tunnel-dial-store`), so the pod never
//! opens a connection to the store itself.
//!
//! Every instance serves statelessly (`http.stateful: false`), so replicas need no session
//! affinity: a session's level lives in the store, and cancellation works per request.

use super::compose::workspace_volume;
use super::{
    CONFIG_PATH, EGRESS_FORWARD, EGRESS_SOCKET, NetworkMode, OWN_NETWORK, PROXY_POLICY_PATH,
    PROXY_PORT, PROXY_UID, SERVE_SOCKET, SOCKET_DIR, STATE_DIR, STORE_SOCKET, ServerPlan,
    TUNNEL_PORT, UID, WORKSPACES_DIR, plan, proxy,
};
use crate::emit::yaml_text::to_yaml;
use crate::emit::{Output, header};
use crate::model::{Deployment, Model};
use bulkhead_vocab::{HostPort, ranges, workspace_layer};
use serde_json::{Map, Value, json};

/// The Secret holding the state store's URL (key `url`); created by the operator.
pub const STATE_SECRET: &str = "bulkhead-state";
/// The Secret holding credentials as files (the signing key, each connector secret).
pub const FILES_SECRET: &str = "bulkhead-secrets";
/// Label of the namespace(s) agents run in: the only source of ingress to instances.
pub const AGENTS_LABEL: &str = "bulkhead.dev/agents";
/// Label of the namespace the PostgreSQL state store runs in.
pub const STORE_LABEL: &str = "bulkhead.dev/state-store";
/// Where secret files are mounted.
const SECRET_DIR: &str = "/run/secrets/bulkhead";
/// Where the state store's Secret is mounted (its key `url` is read through
/// `BULKHEAD_STATE_STORE_FILE`: secrets reach containers as files, never as variables).
const STATE_SECRET_DIR: &str = "/run/secrets/bulkhead-state";
/// The IPv4 ranges an egress rule to `0.0.0.0/0` excepts: every special-purpose range
/// ([`bulkhead_vocab::ranges`]) but `0.0.0.0/8`, which no packet is sent to.
fn special_ipv4() -> Vec<&'static str> {
    ranges::SPECIAL
        .iter()
        .map(|r| r.cidr)
        .filter(|c| !c.contains(':') && *c != "0.0.0.0/8")
        .collect()
}

/// DNS-1123 form of a name (`_` → `-`).
fn dns(name: &str) -> String {
    name.replace('_', "-")
}

fn labels(p: &ServerPlan, role: &str, mode: Option<NetworkMode>) -> Value {
    let mut l = json!({
        "app.kubernetes.io/part-of": "bulkhead",
        "bulkhead.dev/server": dns(&p.server.name),
        "bulkhead.dev/role": role,
    });
    if let Some(m) = mode {
        l["bulkhead.dev/mode"] = json!(m.as_str());
    }
    l
}

/// Adds the manifests of `d` when it targets Kubernetes.
pub fn emit(model: &Model, d: &Deployment, out: &mut Output) {
    let plans = plan(model, d);
    let ns = format!("bulkhead-{}", dns(&d.name));
    let dir = format!("kubernetes/{}", d.name);
    let mut files: Vec<(String, Value)> = Vec::new();
    files.push((
        "namespace.yaml".into(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    ));
    files.push(("config.yaml".into(), config_map(d, &plans)));
    files.extend(common_policies());
    for p in &plans {
        let name = dns(&p.server.name);
        for inst in &p.instances {
            let svc = dns(&inst.service);
            files.push((
                format!(
                    "pvc-{}.yaml",
                    dns(&workspace_volume(&p.server.name, inst.mode))
                ),
                claim(&dns(&workspace_volume(&p.server.name, inst.mode)), "10Gi"),
            ));
            files.push((
                format!("{svc}-deployment.yaml"),
                instance(d, p, inst.mode, &svc),
            ));
            files.push((
                format!("{svc}-service.yaml"),
                service(&svc, p, "instance", Some(inst.mode), p.server.port),
            ));
            files.push((
                format!("netpol-{svc}.yaml"),
                instance_policy(p, inst.mode, &svc),
            ));
            if inst.mode != NetworkMode::Full {
                let relay = format!("{svc}-store-relay");
                files.push((
                    format!("{svc}-tunnel-service.yaml"),
                    tunnel_service(p, inst.mode, &svc),
                ));
                files.push((
                    format!("{relay}-deployment.yaml"),
                    store_relay(d, p, inst.mode, &svc, &relay, &ns),
                ));
                files.push((
                    format!("netpol-{relay}.yaml"),
                    store_relay_policy(p, inst.mode, &relay),
                ));
            }
        }
        for m in &p.data {
            let claim_name = format!("{name}-data-{}", dns(&m.connector));
            files.push((format!("pvc-{claim_name}.yaml"), claim(&claim_name, "1Gi")));
        }
        if let Some(proxy) = p.proxy_service() {
            let proxy = dns(&proxy);
            files.push((
                format!("{proxy}-policy.yaml"),
                json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": format!("{proxy}-policy")},
                    "data": {"policy.conf": proxy::squid_policy(&p.allowed, &p.server.internal_ranges, &p.gated())},
                }),
            ));
            files.push((
                format!("{proxy}-deployment.yaml"),
                egress_proxy(d, p, &proxy),
            ));
            files.push((
                format!("{proxy}-service.yaml"),
                service(&proxy, p, "egress-proxy", None, PROXY_PORT),
            ));
            files.push((format!("netpol-{proxy}.yaml"), proxy_policy(p, &proxy)));
        }
    }
    // Every manifest names its namespace, so it reads right without kustomize.
    for (_, doc) in files.iter_mut() {
        if doc["kind"] != "Namespace" {
            doc["metadata"]["namespace"] = json!(ns);
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let sources = [d.source.as_str()];
    for (file, doc) in &files {
        let mut text = header("#", &sources);
        text.push_str(&to_yaml(doc));
        out.add(format!("{dir}/{file}"), text);
    }
    let mut k = header("#", &sources);
    k.push_str(&format!(
        "# Apply with `kubectl apply -k generated/kubernetes/{}` after creating the Secrets\n\
         # `{STATE_SECRET}` (key `url`: the PostgreSQL state store) and `{FILES_SECRET}` (one key per\n\
         # credential file) in namespace `{ns}`. See README.md here for what runs where.\n",
        d.name
    ));
    k.push_str(&to_yaml(&json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": ns,
        "resources": files.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>(),
    })));
    out.add(format!("{dir}/kustomization.yaml"), k);
    out.add(format!("{dir}/README.md"), review(d, &plans, &ns));
}

fn config_map(d: &Deployment, plans: &[ServerPlan]) -> Value {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    for p in plans {
        for i in &p.instances {
            let s = dns(&i.service);
            hosts.push(s.clone());
            hosts.push(format!("{s}.bulkhead-{}.svc", dns(&d.name)));
            hosts.push(format!("{s}.bulkhead-{}.svc.cluster.local", dns(&d.name)));
        }
    }
    let config = json!({
        "environment": "${BULKHEAD_ENV:-production}",
        "auth": {
            "issuer": "${BULKHEAD_ISSUER:-bulkhead-dev}",
            "audience": "${BULKHEAD_AUDIENCE:-bulkhead}",
            "keys": [{"kid": "dev", "alg": "HS256", "secret": "${BULKHEAD_DEV_SECRET:?put the signing key in Secret bulkhead-secrets, key bulkhead_dev_secret}"}],
        },
        "http": {"allowed_hosts": hosts, "stateful": false},
        // Production: no other key stands in for the one sealing approval questions.
        "approvals": {"key_file": format!("{SECRET_DIR}/approval_key")},
        "state": {
            "dir": STATE_DIR,
            "workspaces": WORKSPACES_DIR,
            "store": "${BULKHEAD_STATE_STORE:?set Secret bulkhead-state, key url, to the PostgreSQL store}",
            // Set in `none` pods only: their store is the relay's socket.
            "store_socket": "${BULKHEAD_STATE_STORE_SOCKET:-}",
            "trust_domain": format!(
                "${{BULKHEAD_TRUST_DOMAIN:-{}}}",
                crate::model::default_trust_domain(&d.name)
            ),
        },
    });
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bulkhead-config"},
        "data": {"config.yaml": to_yaml(&config)},
    })
}

fn claim(name: &str, size: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        // Replicas and the more isolated instances share it: ReadWriteMany.
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}},
    })
}

fn service(name: &str, p: &ServerPlan, role: &str, mode: Option<NetworkMode>, port: u16) -> Value {
    let sel = labels(p, role, mode);
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": sel},
        "spec": {"selector": sel, "ports": [{"name": "http", "port": port, "targetPort": port}]},
    })
}

fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "privileged": false,
        "capabilities": {"drop": ["ALL"]},
    })
}

fn instance(d: &Deployment, p: &ServerPlan, mode: NetworkMode, name: &str) -> Value {
    let port = p.server.port;
    let mut env = vec![
        json!({"name": "BULKHEAD_STATE_STORE_FILE", "value": format!("{STATE_SECRET_DIR}/url")}),
        json!({"name": "BULKHEAD_DEV_SECRET_FILE", "value": format!("{SECRET_DIR}/bulkhead_dev_secret")}),
        json!({"name": "BULKHEAD_LOG", "value": "warn"}),
        json!({"name": "BULKHEAD_TRUST_DOMAIN", "value": p.server.trust_domain}),
    ];
    let mut secret_items = vec![
        json!({"key": "bulkhead_dev_secret", "path": "bulkhead_dev_secret"}),
        json!({"key": "approval_key", "path": "approval_key"}),
    ];
    for v in p.env.iter().filter(|v| ServerPlan::reaches(mode, v.from)) {
        // The spec's default, or empty (the runtime then names the missing variable).
        let value = crate::vars::references(&json!(v.value))
            .first()
            .and_then(|r| r.default().map(str::to_string))
            .unwrap_or_default();
        env.push(json!({"name": v.name, "value": value}));
    }
    for m in p.data.iter().filter(|m| ServerPlan::reaches(mode, m.from)) {
        if let Some(var) = &m.var {
            env.push(json!({"name": var, "value": m.target}));
        }
    }
    for s in p
        .secrets
        .iter()
        .filter(|s| ServerPlan::reaches(mode, s.from))
    {
        env.push(
            json!({"name": format!("{}_FILE", s.var), "value": format!("{SECRET_DIR}/{}", s.name)}),
        );
        secret_items.push(json!({"key": s.name, "path": s.name}));
    }
    if mode.uses_proxy() {
        // The server's own loopback forward to the relay's socket (`serve --forward`), as in
        // compose: it resolves no name, the relay reaches the proxy.
        let proxy = format!("http://{EGRESS_FORWARD}");
        for var in ["HTTP_PROXY", "HTTPS_PROXY"] {
            env.push(json!({"name": var, "value": proxy}));
        }
        env.push(json!({"name": "NO_PROXY", "value": "localhost"}));
    }
    let mut mounts = vec![
        json!({"name": "config", "mountPath": "/etc/bulkhead", "readOnly": true}),
        json!({"name": "secrets", "mountPath": SECRET_DIR, "readOnly": true}),
        json!({"name": "state-store", "mountPath": STATE_SECRET_DIR, "readOnly": true}),
        json!({"name": "state", "mountPath": STATE_DIR}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    let mut volumes = vec![
        json!({"name": "config", "configMap": {"name": "bulkhead-config"}}),
        json!({"name": "secrets", "secret": {"secretName": FILES_SECRET, "items": secret_items}}),
        json!({"name": "state-store", "secret": {"secretName": STATE_SECRET, "items": [{"key": "url", "path": "url"}]}}),
        json!({"name": "state", "emptyDir": {}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    // Per-mode data: its own workspaces read-write, the less isolated ones read-only, none above.
    for lower in NetworkMode::ALL.into_iter().filter(|m| *m <= mode) {
        if p.instance(lower).is_none() {
            continue;
        }
        let vol = dns(&workspace_volume(&p.server.name, lower));
        mounts.push(json!({
            "name": vol,
            "mountPath": format!("{WORKSPACES_DIR}/{}", workspace_layer(&p.server.name, lower)),
            "readOnly": lower != mode,
        }));
        volumes.push(json!({"name": vol, "persistentVolumeClaim": {"claimName": vol, "readOnly": lower != mode}}));
    }
    for m in p.data.iter().filter(|m| ServerPlan::reaches(mode, m.from)) {
        let vol = format!("{}-data-{}", dns(&p.server.name), dns(&m.connector));
        let dir = m
            .target
            .rsplit_once('/')
            .map_or(m.target.as_str(), |(d, _)| d);
        let path = if m.setting == "dir" {
            m.target.as_str()
        } else {
            dir
        };
        mounts.push(json!({"name": vol, "mountPath": path, "readOnly": m.read_only}));
        volumes.push(json!({"name": vol, "persistentVolumeClaim": {"claimName": vol, "readOnly": m.read_only}}));
    }
    // `proxied` and `none` servers have a network namespace of their own (only loopback).
    let isolated = mode != NetworkMode::Full;
    let probe = |path: &str| {
        if isolated {
            // Its server has no network the kubelet reaches: asked over its socket.
            json!({
                "exec": {"command": ["curl", "-fsS", "--noproxy", "*", "-o", "/dev/null",
                                     "--unix-socket", SERVE_SOCKET, format!("http://localhost{path}")]},
                "periodSeconds": 10,
                "timeoutSeconds": 3,
            })
        } else {
            json!({
                "httpGet": {"path": path, "port": port, "httpHeaders": [{"name": "Host", "value": "localhost"}]},
                "periodSeconds": 10,
                "timeoutSeconds": 3,
            })
        }
    };
    let sel = labels(p, "instance", Some(mode));
    let mut metadata = json!({"name": name, "labels": sel});
    if p.sandbox || isolated {
        metadata["annotations"] = json!({
            "checkov.io/skip1": "CKV_K8S_31=bubblewrap (the code sandbox, and an isolated instance's own network namespace) needs a user namespace, which RuntimeDefault refuses; the jail installs its own seccomp filter on the code it runs",
        });
    }
    let mut server = json!({
        "name": "bulkhead",
        "image": d.image.reference(),
        "args": ["serve", p.server.name, "--listen", format!("0.0.0.0:{port}"),
                 "--mode", mode.as_str(), "--config", CONFIG_PATH],
        "ports": [{"name": "http", "containerPort": port}],
        "env": env,
        "volumeMounts": mounts,
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz"),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": container_security(),
    });
    let mut containers = Vec::new();
    if isolated {
        server["command"] = json!(OWN_NETWORK);
        let mut args = vec![
            json!("serve"),
            json!(p.server.name),
            json!("--listen"),
            json!(format!("unix:{SERVE_SOCKET}")),
            json!("--mode"),
            json!(mode.as_str()),
        ];
        if mode.uses_proxy() {
            args.push(json!("--forward"));
            args.push(json!(format!("{EGRESS_FORWARD}=unix:{EGRESS_SOCKET}")));
        }
        args.push(json!("--config"));
        args.push(json!(CONFIG_PATH));
        server["args"] = json!(args);
        server.as_object_mut().map(|o| o.remove("ports"));
        server["env"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"name": "BULKHEAD_STATE_STORE_SOCKET", "value": SOCKET_DIR}));
        server["volumeMounts"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"name": "sock", "mountPath": SOCKET_DIR}));
        volumes.push(json!({"name": "sock", "emptyDir": {}}));
        containers.push(server);
        let mut relay_args = vec![
            "relay".to_string(),
            "--route".into(),
            format!("0.0.0.0:{port}=unix:{SERVE_SOCKET}"),
        ];
        if let Some(proxy) = p.proxy_service().filter(|_| mode.uses_proxy()) {
            // By the Service's address Kubernetes puts in the environment: no name lookup.
            let var = format!(
                "{}_SERVICE_HOST",
                dns(&proxy).to_uppercase().replace('-', "_")
            );
            relay_args.push("--route".into());
            relay_args.push(format!("unix:{EGRESS_SOCKET}=$({var}):{PROXY_PORT}"));
        }
        relay_args.push("--tunnel-accept".into());
        relay_args.push(format!("unix:{STORE_SOCKET}=0.0.0.0:{TUNNEL_PORT}"));
        containers.push(json!({
            "name": "relay",
            "image": d.image.reference(),
            "args": relay_args,
            "ports": [{"name": "http", "containerPort": port},
                      {"name": "tunnel", "containerPort": TUNNEL_PORT}],
            "volumeMounts": [{"name": "sock", "mountPath": SOCKET_DIR}],
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10},
            "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10, "timeoutSeconds": 3},
            "resources": {
                "requests": {"cpu": "50m", "memory": "32Mi"},
                "limits": {"cpu": "500m", "memory": "128Mi"},
            },
            "securityContext": container_security(),
        }));
    } else {
        containers.push(server);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": p.server.replicas,
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": sel},
                "spec": {
                    "automountServiceAccountToken": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": UID,
                        "runAsGroup": UID,
                        "fsGroup": UID,
                        // The runtime's default profile refuses bubblewrap's user namespace;
                        // the jail installs its own filter on the code it runs.
                        "seccompProfile": {"type": if p.sandbox || isolated { "Unconfined" } else { "RuntimeDefault" }},
                    },
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    })
}

fn egress_proxy(d: &Deployment, p: &ServerPlan, name: &str) -> Value {
    let sel = labels(p, "egress-proxy", None);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": sel},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": sel},
                "spec": {
                    "automountServiceAccountToken": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": PROXY_UID,
                        "runAsGroup": PROXY_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "squid",
                        "image": d.proxy_image.reference(),
                        "ports": [{"name": "proxy", "containerPort": PROXY_PORT}],
                        "volumeMounts": [
                            {"name": "policy", "mountPath": PROXY_POLICY_PATH, "subPath": "policy.conf", "readOnly": true},
                            {"name": "shm", "mountPath": "/dev/shm"},
                        ],
                        "readinessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 10},
                        "livenessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 10, "timeoutSeconds": 3},
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"cpu": "500m", "memory": "256Mi"},
                        },
                        "securityContext": container_security(),
                    }],
                    "volumes": [
                        {"name": "policy", "configMap": {"name": format!("{name}-policy")}},
                        {"name": "shm", "emptyDir": {"medium": "Memory"}},
                    ],
                },
            },
        },
    })
}

fn policy(
    name: &str,
    selector: Value,
    types: &[&str],
    ingress: Option<Value>,
    egress: Option<Value>,
) -> Value {
    let mut spec = Map::new();
    spec.insert("podSelector".into(), selector);
    spec.insert("policyTypes".into(), json!(types));
    if let Some(i) = ingress {
        spec.insert("ingress".into(), i);
    }
    if let Some(e) = egress {
        spec.insert("egress".into(), e);
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// Default deny, DNS for every pod but the `none` instances, the state store for the other
/// instances and the store relays.
fn common_policies() -> Vec<(String, Value)> {
    let not_isolated =
        json!({"key": "bulkhead.dev/mode", "operator": "NotIn", "values": ["none", "proxied"]});
    let part_of = json!({
        "matchLabels": {"app.kubernetes.io/part-of": "bulkhead"},
        "matchExpressions": [not_isolated],
    });
    let instances = json!({
        "matchLabels": {"app.kubernetes.io/part-of": "bulkhead"},
        "matchExpressions": [
            {"key": "bulkhead.dev/role", "operator": "In", "values": ["instance", "store-relay"]},
            not_isolated,
        ],
    });
    vec![
        (
            "netpol-default-deny.yaml".into(),
            policy(
                "default-deny",
                json!({}),
                &["Ingress", "Egress"],
                None,
                None,
            ),
        ),
        (
            "netpol-dns.yaml".into(),
            policy(
                "dns",
                part_of,
                &["Egress"],
                None,
                Some(json!([{
                    "to": [{
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                }])),
            ),
        ),
        (
            "netpol-state-store.yaml".into(),
            policy(
                "state-store",
                instances,
                &["Egress"],
                None,
                Some(json!([{
                    "to": [{"namespaceSelector": {"matchLabels": {STORE_LABEL: "true"}}}],
                    "ports": [{"protocol": "TCP", "port": 5432}],
                }])),
            ),
        ),
    ]
}

fn ports_of(entries: &[HostPort]) -> Vec<u16> {
    let mut ports: Vec<u16> = entries.iter().map(|e| e.port).collect();
    ports.sort();
    ports.dedup();
    ports
}

fn instance_policy(p: &ServerPlan, mode: NetworkMode, name: &str) -> Value {
    let sel = json!({"matchLabels": labels(p, "instance", Some(mode))});
    let mut ingress = json!([{
        "from": [{"namespaceSelector": {"matchLabels": {AGENTS_LABEL: "true"}}}],
        "ports": [{"protocol": "TCP", "port": p.server.port}],
    }]);
    if mode != NetworkMode::Full {
        // Its store relay dials in.
        ingress.as_array_mut().expect("a list").push(json!({
            "from": [{"podSelector": {"matchLabels": store_relay_labels(p, mode)}}],
            "ports": [{"protocol": "TCP", "port": TUNNEL_PORT}],
        }));
    }
    if mode == NetworkMode::None {
        // Nothing goes out: no egress rule at all.
        return policy(name, sel, &["Ingress", "Egress"], Some(ingress), None);
    }
    let egress = match mode {
        NetworkMode::Full => {
            let ports = ports_of(&p.server.egress);
            (!ports.is_empty()).then(|| json!([{
                "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": special_ipv4()}}],
                "ports": ports.iter().map(|p| json!({"protocol": "TCP", "port": p})).collect::<Vec<_>>(),
            }]))
        }
        NetworkMode::Proxied => Some(json!([{
            "to": [{"podSelector": {"matchLabels": labels(p, "egress-proxy", None)}}],
            "ports": [{"protocol": "TCP", "port": PROXY_PORT}],
        }])),
        NetworkMode::None => None,
    };
    let types: &[&str] = if egress.is_some() {
        &["Ingress", "Egress"]
    } else {
        &["Ingress"]
    };
    policy(name, sel, types, Some(ingress), egress)
}

/// A store relay's labels: for the instance of `mode`.
fn store_relay_labels(p: &ServerPlan, mode: NetworkMode) -> Value {
    let mut l = labels(p, "store-relay", None);
    l["bulkhead.dev/instance-mode"] = json!(mode.as_str());
    l
}

/// The headless Service naming each pod's tunnel port of an instance with a network of its own
/// (its store relay resolves it to every pod, replicas included).
fn tunnel_service(p: &ServerPlan, mode: NetworkMode, svc: &str) -> Value {
    let sel = labels(p, "instance", Some(mode));
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": format!("{svc}-tunnel"), "labels": sel},
        "spec": {
            "clusterIP": "None",
            "selector": sel,
            "ports": [{"name": "tunnel", "port": TUNNEL_PORT, "targetPort": TUNNEL_PORT}],
        },
    })
}

/// The store relay of a `proxied` or `none` instance: keeps tunnels open into each of its pods
/// and relays each one put to use to the state store (read from the same Secret the instances
/// read).
fn store_relay(
    d: &Deployment,
    p: &ServerPlan,
    mode: NetworkMode,
    svc: &str,
    name: &str,
    ns: &str,
) -> Value {
    let sel = store_relay_labels(p, mode);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": sel,
            "annotations": {
                "checkov.io/skip1": "CKV_K8S_8=a store relay listens on nothing a probe could ask: it only dials (the tunnels into the isolated pods, and the store)",
                "checkov.io/skip2": "CKV_K8S_9=a store relay listens on nothing a probe could ask: it only dials (the tunnels into the isolated pods, and the store)",
            },
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": sel},
                "spec": {
                    "automountServiceAccountToken": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": UID,
                        "runAsGroup": UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "relay",
                        "image": d.image.reference(),
                        "args": ["relay",
                                 "--tunnel-dial-store", format!("{svc}-tunnel.{ns}.svc.cluster.local:{TUNNEL_PORT}"),
                                 "--store-url-file", format!("{STATE_SECRET_DIR}/url")],
                        "volumeMounts": [{"name": "state-store", "mountPath": STATE_SECRET_DIR, "readOnly": true}],
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "32Mi"},
                            "limits": {"cpu": "500m", "memory": "128Mi"},
                        },
                        "securityContext": container_security(),
                    }],
                    "volumes": [
                        {"name": "state-store", "secret": {"secretName": STATE_SECRET, "items": [{"key": "url", "path": "url"}]}},
                    ],
                },
            },
        },
    })
}

/// A store relay reaches its instance's tunnel port (and, by `state-store`, the store).
fn store_relay_policy(p: &ServerPlan, mode: NetworkMode, name: &str) -> Value {
    let sel = json!({"matchLabels": store_relay_labels(p, mode)});
    let egress = json!([{
        "to": [{"podSelector": {"matchLabels": labels(p, "instance", Some(mode))}}],
        "ports": [{"protocol": "TCP", "port": TUNNEL_PORT}],
    }]);
    policy(name, sel, &["Ingress", "Egress"], None, Some(egress))
}

fn proxy_policy(p: &ServerPlan, name: &str) -> Value {
    let sel = json!({"matchLabels": labels(p, "egress-proxy", None)});
    let ingress = json!([{
        "from": [{"podSelector": {"matchLabels": labels(p, "instance", Some(NetworkMode::Proxied))}}],
        "ports": [{"protocol": "TCP", "port": PROXY_PORT}],
    }]);
    let ports = ports_of(&p.allowed);
    // Public addresses, the internal ranges the deployment names, and allowlisted internal
    // addresses written as such; never a local or another internal range (squid checks names).
    let except = special_ipv4();
    let mut to = vec![json!({"ipBlock": {"cidr": "0.0.0.0/0", "except": except}})];
    for r in &p.server.internal_ranges {
        to.push(json!({"ipBlock": {"cidr": r}}));
    }
    for a in &p.allowed {
        if let Ok(ip) = a.host.parse::<std::net::Ipv4Addr>()
            && ranges::openable(&format!("{ip}/32")).is_ok()
        {
            to.push(json!({"ipBlock": {"cidr": format!("{ip}/32")}}));
        }
    }
    let egress = (!ports.is_empty()).then(|| json!([{
        "to": to,
        "ports": ports.iter().map(|p| json!({"protocol": "TCP", "port": p})).collect::<Vec<_>>(),
    }]));
    let types: &[&str] = if egress.is_some() {
        &["Ingress", "Egress"]
    } else {
        &["Ingress"]
    };
    policy(name, sel, types, Some(ingress), egress)
}

/// `README.md` beside the manifests: what to provide, and the same policy tables as compose.
fn review(d: &Deployment, plans: &[ServerPlan], ns: &str) -> String {
    use std::fmt::Write as _;
    let mut t = String::from("<!--\n");
    for line in header("", &[&d.source]).lines() {
        t.push_str(line.trim_start());
        t.push('\n');
    }
    t.push_str("-->\n");
    let (image, proxy_image) = (d.image.reference(), d.proxy_image.reference());
    let _ = write!(
        t,
        "# Deployment `{}` on Kubernetes\n\n\
         `kubectl apply -k .` into namespace `{ns}`, after providing:\n\n\
         - the images `{image}` (`generated/docker/Dockerfile`) and `{proxy_image}` (`generated/docker/Dockerfile.proxy`) in your registry (named in `specs/deployments/`, `image:` and `proxy_image:`, with a digest for production);\n\
         - Secret `{STATE_SECRET}` with key `url`: the PostgreSQL state store every instance and replica shares (`postgres://user:pass@host:5432/db`; a managed PostgreSQL or an operator-run one such as CloudNativePG), in a namespace labelled `{STORE_LABEL}=true`;\n\
         - Secret `{FILES_SECRET}` with key `bulkhead_dev_secret` (the signing key), key `approval_key` (at least 32 random bytes sealing approval questions: `head -c 32 /dev/urandom`) and one key per connector secret listed below;\n\
         - the label `{AGENTS_LABEL}=true` on the namespace your agents run in (the only source of traffic to the instances);\n\
         - data for the `*-data-*` claims (the connector files each instance mounts read-only).\n\n\
         Instances serve statelessly, so replicas need no session affinity: a session's level lives in the store, read on every call.\n\n\
         ## Network policies\n\n\
         | pods | in | out |\n|---|---|---|\n\
         | every pod but `proxied` and `none` instances | nothing (`default-deny`) | DNS (`dns`) |\n\
         | `full` instance | agents' namespace, its port | + PostgreSQL store on 5432 (`state-store`), + the ports of `egress` to public addresses |\n\
         | `proxied` instance | agents' namespace, its port; its store relay on {TUNNEL_PORT} | its egress proxy on {PROXY_PORT} only (by its Service's address: no DNS) |\n\
         | `none` instance | agents' namespace, its port; its store relay on {TUNNEL_PORT} | nothing at all |\n\
         | (`proxied`, `none`) | | the server runs in a network namespace of its own (bubblewrap, only loopback) on a Unix socket; the pod's relay carries clients to it, a proxied server's forward to its proxy, and its store connections over tunnels its store relay opens into the pod |\n\
         | store relay (`<instance>-store-relay`) | nothing | DNS, the store on 5432, its instance's pods on {TUNNEL_PORT} |\n\
         | egress proxy | its proxied instance on {PROXY_PORT} | + the allowlist's ports to public addresses and the named internal ranges (squid checks each `host:port`; never local, link-local or other private ranges) |\n",
        d.name
    );
    for p in plans {
        t.push_str(&super::diagram::tables(p));
        let _ = writeln!(t, "\nReplicas per instance: {}.", p.server.replicas);
    }
    t
}
