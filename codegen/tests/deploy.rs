//! Properties of the deployment artifacts, read back with an independent YAML parser (saphyr)
//! for every fixture with deployments and for the project's own `specs/`:
//! no `network_mode`, proxied and isolated instances only on internal networks, the compliance
//! volume never inside the workspace mount, the proxy allowing exactly `proxied_egress`, and
//! client entries naming exactly the instances that exist.

use bulkhead_codegen::model::Model;
use bulkhead_codegen::source::SourceFile;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn tests_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
}

/// (label, model) for every spec tree that has deployments.
fn models() -> Vec<(String, Model)> {
    let mut out = Vec::new();
    for fixture in ["connectors", "deploy"] {
        let dir = tests_dir().join("fixtures").join(fixture);
        let model = bulkhead_codegen::load(&dir, tests_dir()).unwrap_or_else(|e| panic!("{e}"));
        out.push((fixture.to_string(), model));
    }
    let root = tests_dir().join("../..");
    let model =
        bulkhead_codegen::load(&root.join("specs"), &root).unwrap_or_else(|e| panic!("{e}"));
    out.push(("specs".to_string(), model));
    out
}

fn yaml(path: &str, text: &str) -> Value {
    let file = SourceFile::in_memory(path, text);
    match bulkhead_codegen::yaml::parse(&file) {
        Ok(node) => node.to_json(),
        Err(e) => panic!("{path} is not YAML: {e:?}"),
    }
}

fn file(model: &Model, rel: &str) -> Value {
    let out = bulkhead_codegen::generate(model);
    let text = out
        .files
        .get(Path::new(rel))
        .unwrap_or_else(|| panic!("{rel} not generated"));
    if rel.ends_with(".json") {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{rel}: {e}"))
    } else {
        yaml(rel, text)
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Network names a service joins (list or map form).
fn networks_of(svc: &Value) -> Vec<String> {
    match &svc["networks"] {
        Value::Array(_) => strs(&svc["networks"]),
        Value::Object(m) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Every violation of the compose properties in one compose document.
fn compose_violations(doc: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let services = doc["services"].as_object().cloned().unwrap_or_default();
    let internal = |net: &str| doc["networks"][net]["internal"] == Value::Bool(true);
    for (name, svc) in &services {
        if svc.get("network_mode").is_some() {
            bad.push(format!("{name}: has network_mode"));
        }
        let command = strs(&svc["command"]);
        let mode = command
            .iter()
            .position(|a| a == "--mode")
            .and_then(|i| command.get(i + 1))
            .cloned();
        let nets = networks_of(svc);
        if nets.is_empty() {
            bad.push(format!("{name}: on no network"));
        }
        match mode.as_deref() {
            Some("proxied") | Some("none") => {
                for n in nets.iter().filter(|n| !internal(n)) {
                    bad.push(format!(
                        "{name}: isolated instance on non-internal network {n}"
                    ));
                }
                if svc.get("ports").is_some() {
                    bad.push(format!("{name}: isolated instance publishes ports"));
                }
            }
            Some("full") => {
                if !nets.iter().any(|n| n == "agents") {
                    bad.push(format!("{name}: full instance not on agents"));
                }
            }
            Some(other) => bad.push(format!("{name}: unknown mode {other}")),
            None => {
                if !name.ends_with("-egress-proxy") {
                    bad.push(format!("{name}: neither an instance nor a proxy"));
                }
            }
        }
        if mode.is_some() {
            let mounts: Vec<(String, String)> = strs(&svc["volumes"])
                .iter()
                .filter_map(|v| {
                    let mut parts = v.split(':');
                    Some((parts.next()?.to_string(), parts.next()?.to_string()))
                })
                .collect();
            let target = |vol: &str| {
                mounts
                    .iter()
                    .find(|(src, _)| src == vol)
                    .map(|(_, t)| t.trim_end_matches('/').to_string())
            };
            match (target("workspaces"), target("compliance")) {
                (Some(ws), Some(state)) => {
                    if state == ws
                        || state.starts_with(&format!("{ws}/"))
                        || ws.starts_with(&format!("{state}/"))
                    {
                        bad.push(format!(
                            "{name}: compliance volume {state} nested with workspaces {ws}"
                        ));
                    }
                }
                _ => bad.push(format!("{name}: workspaces or compliance volume missing")),
            }
            if svc["read_only"] != Value::Bool(true) || strs(&svc["cap_drop"]) != ["ALL"] {
                bad.push(format!("{name}: not hardened"));
            }
            if svc.get("healthcheck").is_none() || svc["restart"] != "unless-stopped" {
                bad.push(format!("{name}: no healthcheck or restart policy"));
            }
        }
    }
    bad
}

#[test]
fn compose_files_keep_isolation_properties() {
    for (label, model) in models() {
        for d in &model.deployments {
            let doc = file(&model, &format!("compose/{}.yaml", d.name));
            let bad = compose_violations(&doc);
            assert!(bad.is_empty(), "{label}/{}: {bad:#?}", d.name);
        }
    }
}

#[test]
fn the_property_check_catches_each_violation() {
    let (_, model) = models().remove(1);
    let doc = file(&model, "compose/prod.yaml");
    type Mutation = (&'static str, fn(&mut Value));
    let mutations: [Mutation; 4] = [
        ("network_mode", |d| {
            d["services"]["vault-isolated"]["network_mode"] = "none".into()
        }),
        ("non-internal", |d| {
            d["services"]["vault-proxied"]["networks"] = serde_json::json!(["agents", "egress"])
        }),
        ("nested", |d| {
            d["services"]["vault"]["volumes"][1] =
                "compliance:/var/lib/bulkhead/workspaces/state".into()
        }),
        ("not hardened", |d| {
            d["services"]["notes"]["read_only"] = false.into()
        }),
    ];
    for (what, mutate) in mutations {
        let mut d = doc.clone();
        mutate(&mut d);
        assert!(!compose_violations(&d).is_empty(), "{what} went unnoticed");
    }
}

#[test]
fn instances_follow_the_highest_sensitivity() {
    let (_, model) = models().remove(1);
    let doc = file(&model, "compose/prod.yaml");
    let names: BTreeSet<&str> = doc["services"]
        .as_object()
        .expect("services")
        .keys()
        .map(String::as_str)
        .collect();
    // vault reaches secret (all three + proxy); notes only internal (full only).
    let expected: BTreeSet<&str> = [
        "notes",
        "vault",
        "vault-egress-proxy",
        "vault-isolated",
        "vault-proxied",
    ]
    .into();
    assert_eq!(names, expected);
    let proxy = &doc["services"]["vault-egress-proxy"];
    let mut nets = networks_of(proxy);
    nets.sort();
    assert_eq!(nets, ["egress", "vault-proxied-net"]);
    assert_eq!(networks_of(&doc["services"]["vault-isolated"]), ["agents"]);
}

/// (authorities allowed by the HTTP listener, cluster endpoints, TCP listener ports).
fn proxy_allowlist(cfg: &Value) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<u64>) {
    let listeners = cfg["static_resources"]["listeners"]
        .as_array()
        .expect("listeners");
    let mut vhost_domains = BTreeSet::new();
    let mut tcp_ports = BTreeSet::new();
    for l in listeners {
        let port = l["address"]["socket_address"]["port_value"]
            .as_u64()
            .expect("port");
        let filter = &l["filter_chains"][0]["filters"][0];
        if filter["name"] == "envoy.filters.network.http_connection_manager" {
            assert_eq!(port, 3128);
            for vh in filter["typed_config"]["route_config"]["virtual_hosts"]
                .as_array()
                .expect("vhosts")
            {
                let domains = strs(&vh["domains"]);
                if domains == ["*"] {
                    for r in vh["routes"].as_array().expect("routes") {
                        assert_eq!(r["direct_response"]["status"], 403, "the default must deny");
                    }
                    continue;
                }
                // A port-80 entry also matches its bare host; everything else carries its port.
                vhost_domains.extend(domains.into_iter().filter(|d| d.contains(':')));
            }
        } else {
            assert_eq!(filter["name"], "envoy.filters.network.tcp_proxy");
            tcp_ports.insert(port);
        }
    }
    let mut endpoints = BTreeSet::new();
    for c in cfg["static_resources"]["clusters"]
        .as_array()
        .expect("clusters")
    {
        assert_eq!(c["type"], "STRICT_DNS");
        for e in c["load_assignment"]["endpoints"][0]["lb_endpoints"]
            .as_array()
            .expect("endpoints")
        {
            let a = &e["endpoint"]["address"]["socket_address"];
            endpoints.insert(format!(
                "{}:{}",
                a["address"].as_str().expect("host"),
                a["port_value"]
            ));
        }
    }
    assert!(cfg.get("admin").is_none(), "no admin listener");
    (vhost_domains, endpoints, tcp_ports)
}

#[test]
fn the_proxy_allows_exactly_proxied_egress() {
    let mut checked = 0;
    for (label, model) in models() {
        for d in &model.deployments {
            for s in &d.servers {
                let rel = format!("proxy/{}-{}.yaml", d.name, s.name);
                let out = bulkhead_codegen::generate(&model);
                let Some(text) = out.files.get(Path::new(&rel)) else {
                    continue;
                };
                let (domains, endpoints, tcp) = proxy_allowlist(&yaml(&rel, text));
                let want: BTreeSet<String> = s.proxied_egress.iter().cloned().collect();
                assert_eq!(domains, want, "{label}/{rel}: HTTP listener");
                assert_eq!(endpoints, want, "{label}/{rel}: clusters");
                for p in &tcp {
                    assert!(
                        ![80, 443, 3128].contains(p),
                        "{label}/{rel}: TCP listener on {p}"
                    );
                    assert!(
                        want.iter().any(|w| w.ends_with(&format!(":{p}"))),
                        "{label}/{rel}: TCP {p}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 2, "proxies checked: {checked}");
}

#[test]
fn tcp_entries_resolve_to_the_proxy_in_the_proxied_instance_only() {
    let (_, model) = models().remove(1);
    let doc = file(&model, "compose/prod.yaml");
    let proxied = &doc["services"]["vault-proxied"];
    let ip = doc["services"]["vault-egress-proxy"]["networks"]["vault-proxied-net"]["ipv4_address"]
        .as_str()
        .expect("the proxy has a fixed address");
    // One host per port gets a TCP listener; replica-a/-b share 7000 and are CONNECT-only.
    assert_eq!(
        strs(&proxied["extra_hosts"]),
        [format!("cache.internal:{ip}"), format!("db.internal:{ip}")]
    );
    let (_, _, tcp) = proxy_allowlist(&file(&model, "proxy/prod-vault.yaml"));
    assert_eq!(tcp, [5432, 6379].into());
    assert!(
        doc["services"]["vault-egress-proxy"]
            .get("extra_hosts")
            .is_none()
    );
    assert_eq!(
        proxied["environment"]["HTTPS_PROXY"],
        "http://vault-egress-proxy:3128"
    );
}

#[test]
fn client_entries_name_exactly_the_instances() {
    for (label, model) in models() {
        for d in &model.deployments {
            let compose = file(&model, &format!("compose/{}.yaml", d.name));
            let clients = file(&model, &format!("clients/{}.yaml", d.name));
            for s in &d.servers {
                let e = &clients["mcp_servers"][&s.name];
                assert_eq!(
                    e["url"],
                    format!("http://{}:{}/mcp", s.name, s.port),
                    "{label}"
                );
                assert_eq!(e["read_timeout"], 60);
                assert_eq!(e["trusted"], true);
                for (key, suffix) in [("url_proxied", "-proxied"), ("url_isolated", "-isolated")] {
                    let service = format!("{}{suffix}", s.name);
                    let exists = compose["services"].get(&service).is_some();
                    assert_eq!(e.get(key).is_some(), exists, "{label}/{}: {key}", s.name);
                    if exists {
                        assert_eq!(e[key], format!("http://{service}:{}/mcp", s.port));
                    }
                }
                let local = format!("http://localhost:{}/mcp", s.port);
                let claude = file(&model, &format!("clients/{}.claude_desktop.json", d.name));
                assert_eq!(claude["mcpServers"][&s.name]["args"][1], local.as_str());
                let vscode = file(&model, &format!("clients/{}.vscode.json", d.name));
                assert_eq!(vscode["servers"][&s.name]["type"], "http");
                assert_eq!(vscode["servers"][&s.name]["url"], local.as_str());
                let cursor = file(&model, &format!("clients/{}.cursor.json", d.name));
                assert_eq!(cursor["mcpServers"][&s.name]["url"], local.as_str());
            }
        }
    }
}

#[test]
fn runtime_config_accepts_every_service_name_as_host() {
    for (label, model) in models() {
        for d in &model.deployments {
            let compose = file(&model, &format!("compose/{}.yaml", d.name));
            let config = file(&model, &format!("config/{}.yaml", d.name));
            let hosts: BTreeSet<String> =
                strs(&config["http"]["allowed_hosts"]).into_iter().collect();
            for (name, svc) in compose["services"].as_object().expect("services") {
                if svc
                    .get("command")
                    .is_some_and(|c| strs(c).contains(&"--mode".to_string()))
                {
                    assert!(hosts.contains(name), "{label}: {name} not in allowed_hosts");
                }
            }
        }
    }
}
