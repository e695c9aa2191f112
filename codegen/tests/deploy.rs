//! Properties of the deployment artifacts, read back with an independent YAML parser (saphyr)
//! for every fixture with deployments and for the project's own `specs/`:
//! proxied and isolated instances with `network_mode: none`, reached only through relays that route
//! to their sockets and the egress proxy and nowhere else, the compliance
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

/// Whether `d` has compose output (the files these properties read).
fn compose(d: &bulkhead_codegen::model::Deployment) -> bool {
    d.targets
        .contains(&bulkhead_codegen::spec::DeployTarget::Compose)
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
        let command = strs(&svc["command"]);
        let mode = command
            .iter()
            .position(|a| a == "--mode")
            .and_then(|i| command.get(i + 1))
            .cloned();
        let nets = networks_of(svc);
        match mode.as_deref() {
            Some("proxied") | Some("none") => {
                if svc["network_mode"] != "none" || !nets.is_empty() {
                    bad.push(format!("{name}: isolated instance has a network"));
                }
                if svc.get("ports").is_some() {
                    bad.push(format!("{name}: isolated instance publishes ports"));
                }
                // Its only ways in and out are sockets in its own socket volume.
                let listen = command
                    .iter()
                    .position(|a| a == "--listen")
                    .and_then(|i| command.get(i + 1))
                    .cloned()
                    .unwrap_or_default();
                if !listen.starts_with("unix:/run/bulkhead/sock/") {
                    bad.push(format!("{name}: listens on {listen}"));
                }
                for (i, a) in command.iter().enumerate() {
                    if a == "--forward" {
                        let route = command.get(i + 1).cloned().unwrap_or_default();
                        if !route.contains("=unix:/run/bulkhead/sock/") {
                            bad.push(format!("{name}: forwards {route}"));
                        }
                    }
                }
            }
            Some("full") => {
                if !nets.iter().any(|n| n == "agents") || svc.get("network_mode").is_some() {
                    bad.push(format!("{name}: full instance not on agents"));
                }
            }
            Some(other) => bad.push(format!("{name}: unknown mode {other}")),
            None if command.first().map(String::as_str) == Some("relay") => {
                bad.extend(relay_violations(doc, name, svc));
            }
            None => {
                if !name.ends_with("-egress-proxy") {
                    bad.push(format!("{name}: neither an instance, a relay nor a proxy"));
                } else if nets != ["egress"] {
                    bad.push(format!("{name}: proxy on {nets:?}"));
                }
            }
        }
        if svc.get("network_mode").is_some() && !matches!(mode.as_deref(), Some("proxied" | "none"))
        {
            bad.push(format!("{name}: has network_mode"));
        }
        for n in nets.iter().filter(|n| *n != "egress" && !internal(n)) {
            bad.push(format!("{name}: on non-internal network {n}"));
        }
        if mode.is_some() {
            let mounts: Vec<(String, String)> = strs(&svc["volumes"])
                .iter()
                .filter_map(|v| {
                    let mut parts = v.split(':');
                    Some((parts.next()?.to_string(), parts.next()?.to_string()))
                })
                .collect();
            let state = mounts
                .iter()
                .find(|(src, _)| src == "compliance")
                .map(|(_, t)| t.trim_end_matches('/').to_string());
            let Some(state) = state else {
                bad.push(format!("{name}: compliance volume missing"));
                continue;
            };
            let mode_rank = |m: &str| ["full", "proxied", "none"].iter().position(|x| *x == m);
            let own = mode.as_deref().and_then(mode_rank).unwrap_or(0);
            let mut writes_own = false;
            for v in strs(&svc["volumes"]) {
                let parts: Vec<&str> = v.split(':').collect();
                let (src, target) = (parts[0], parts.get(1).copied().unwrap_or(""));
                let read_only = parts.get(2) == Some(&"ro");
                // Per-mode data: a workspace volume is written by the instance of its mode.
                let Some((_, written_by)) = src.rsplit_once("-ws-") else {
                    continue;
                };
                let Some(rank) = mode_rank(written_by) else {
                    bad.push(format!("{name}: workspace volume {src} of unknown mode"));
                    continue;
                };
                if rank > own {
                    bad.push(format!(
                        "{name}: mounts {src}, written by a more isolated instance"
                    ));
                } else if rank < own && !read_only {
                    bad.push(format!(
                        "{name}: mounts {src} of a less isolated instance read-write"
                    ));
                } else if rank == own {
                    writes_own = !read_only;
                }
                let ws = target.trim_end_matches('/');
                if state == ws
                    || state.starts_with(&format!("{ws}/"))
                    || ws.starts_with(&format!("{state}/"))
                {
                    bad.push(format!(
                        "{name}: compliance volume {state} nested with workspaces {ws}"
                    ));
                }
            }
            if !writes_own {
                bad.push(format!(
                    "{name}: no workspace volume of its own, read-write"
                ));
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

/// A relay copies bytes to its instance's socket and, for a proxied one, from its egress socket to
/// the server's egress proxy: any other route is a way around isolation.
fn relay_violations(doc: &Value, name: &str, svc: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(instance) = name.strip_suffix("-relay") else {
        return vec![format!("{name}: a relay not named after its instance")];
    };
    let Some(inst) = doc["services"].get(instance) else {
        return vec![format!("{name}: relays for missing {instance}")];
    };
    let server = strs(&inst["command"]).get(1).cloned().unwrap_or_default();
    let command = strs(&svc["command"]);
    for (i, a) in command.iter().enumerate() {
        if a != "--route" {
            continue;
        }
        let route = command.get(i + 1).cloned().unwrap_or_default();
        let Some((listen, target)) = route.split_once('=') else {
            bad.push(format!("{name}: route {route}"));
            continue;
        };
        let to_socket = target.starts_with("unix:/run/bulkhead/sock/");
        let to_proxy = target == format!("{server}-egress-proxy:3128")
            && listen.starts_with("unix:/run/bulkhead/sock/")
            && strs(&inst["command"]).contains(&"proxied".to_string());
        if !to_socket && !to_proxy {
            bad.push(format!("{name}: routes {listen} to {target}"));
        }
    }
    // It shares only its instance's socket volume: no workspaces, state or secrets.
    let mode = strs(&inst["command"])
        .iter()
        .position(|a| a == "--mode")
        .and_then(|i| strs(&inst["command"]).get(i + 1).cloned())
        .unwrap_or_default();
    let own = format!("{server}-sock-{mode}:/run/bulkhead/sock");
    if strs(&svc["volumes"]) != [own.clone()] {
        bad.push(format!(
            "{name}: mounts {:?}, not only {own}",
            strs(&svc["volumes"])
        ));
    }
    if svc.get("secrets").is_some() || svc.get("environment").is_some() {
        bad.push(format!("{name}: carries secrets or environment"));
    }
    let aliases = strs(&svc["networks"]["agents"]["aliases"]);
    if aliases != [instance.to_string()] {
        bad.push(format!("{name}: not reachable as {instance} on agents"));
    }
    if svc["read_only"] != Value::Bool(true) || strs(&svc["cap_drop"]) != ["ALL"] {
        bad.push(format!("{name}: not hardened"));
    }
    bad
}

#[test]
fn compose_files_keep_isolation_properties() {
    for (label, model) in models() {
        for d in model.deployments.iter().filter(|d| compose(d)) {
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
    let mutations: [Mutation; 10] = [
        ("isolated instance on a network", |d| {
            let svc = d["services"]["vault-isolated"].as_object_mut().unwrap();
            svc.remove("network_mode");
            svc.insert("networks".into(), serde_json::json!(["agents"]));
        }),
        ("proxied instance on egress", |d| {
            let svc = d["services"]["vault-proxied"].as_object_mut().unwrap();
            svc.remove("network_mode");
            svc.insert("networks".into(), serde_json::json!(["agents", "egress"]));
        }),
        ("relay routes past the proxy", |d| {
            let c = d["services"]["vault-proxied-relay"]["command"]
                .as_array_mut()
                .unwrap();
            let last = c.len() - 1;
            c[last] = "unix:/run/bulkhead/sock/egress.sock=hooks.example.com:443".into();
        }),
        ("relay mounts the workspaces", |d| {
            let v = d["services"]["vault-isolated-relay"]["volumes"]
                .as_array_mut()
                .unwrap();
            v.push("vault-ws-none:/var/lib/bulkhead/workspaces/vault.none:ro".into());
        }),
        ("full instance with network_mode", |d| {
            d["services"]["vault"]["network_mode"] = "host".into()
        }),
        ("nested", |d| {
            d["services"]["vault"]["volumes"][1] =
                "compliance:/var/lib/bulkhead/workspaces/vault/state".into()
        }),
        ("full mounts the proxied workspaces", |d| {
            let v = d["services"]["vault"]["volumes"].as_array_mut().unwrap();
            v.push("vault-ws-proxied:/var/lib/bulkhead/workspaces/vault.proxied:ro".into());
        }),
        ("proxied writes the full workspaces", |d| {
            d["services"]["vault-proxied"]["volumes"][0] =
                "vault-ws-full:/var/lib/bulkhead/workspaces/vault".into()
        }),
        ("isolated without its own workspaces", |d| {
            let v = d["services"]["vault-isolated"]["volumes"]
                .as_array_mut()
                .unwrap();
            v.retain(|m| !m.as_str().unwrap().starts_with("vault-ws-none:"));
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
        "vault-isolated-relay",
        "vault-proxied",
        "vault-proxied-relay",
    ]
    .into();
    assert_eq!(names, expected);
    let proxy = &doc["services"]["vault-egress-proxy"];
    assert_eq!(networks_of(proxy), ["egress"]);
    assert_eq!(doc["services"]["vault-isolated"]["network_mode"], "none");
    assert!(networks_of(&doc["services"]["vault-isolated"]).is_empty());
}

/// The `host:port` pairs a squid policy allows: every `http_access allow` line must name one
/// host ACL and one port ACL; the last access rule must deny everything.
fn proxy_allowlist(conf: &str) -> BTreeSet<String> {
    let mut hosts = std::collections::BTreeMap::new();
    let mut ports = std::collections::BTreeMap::new();
    let mut allowed = BTreeSet::new();
    let mut last_access = String::new();
    for line in conf
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["acl", name, "dstdomain" | "dst", "-n", host] => {
                hosts.insert(name.to_string(), host.to_string());
            }
            ["acl", name, "port", port] => {
                ports.insert(name.to_string(), port.to_string());
            }
            ["acl", ..] => {}
            ["http_access", "allow", h, p] => {
                allowed.insert(format!("{}:{}", hosts[*h], ports[*p]));
                last_access = line.to_string();
            }
            // A gate's labelled requests: one of the instance's pairs, for one connector.
            ["http_access", "allow", c, h, p] if c.starts_with("bh_c") => {
                allowed.insert(format!("{}:{}", hosts[*h], ports[*p]));
            }
            ["http_access", "allow", ..] => panic!("an allow rule of another shape: {line}"),
            ["http_access", ..] => last_access = line.to_string(),
            [directive, ..] => assert!(
                !["http_port", "include", "never_direct", "cache_peer"].contains(directive),
                "the policy may not say where it listens or forward elsewhere: {line}"
            ),
            [] => {}
        }
    }
    assert_eq!(last_access, "http_access deny all", "deny by default");
    allowed
}

#[test]
fn the_proxy_allows_exactly_proxied_egress() {
    let mut checked = 0;
    for (label, model) in models() {
        let out = bulkhead_codegen::generate(&model);
        for d in model.deployments.iter().filter(|d| compose(d)) {
            for s in &d.servers {
                let rel = format!("proxy/{}-{}.squid.conf", d.name, s.name);
                let compose = file(&model, &format!("compose/{}.yaml", d.name));
                let proxied = compose["services"].get(format!("{}-proxied", s.name));
                let Some(text) = out.files.get(Path::new(&rel)) else {
                    assert!(proxied.is_none(), "{label}: {rel} missing");
                    continue;
                };
                let want: BTreeSet<String> =
                    s.proxied_egress.iter().map(ToString::to_string).collect();
                assert_eq!(proxy_allowlist(text), want, "{label}/{rel}");
                // compose mounts exactly this file into the proxy.
                let proxy = &compose["services"][format!("{}-egress-proxy", s.name)];
                assert_eq!(
                    strs(&proxy["volumes"]),
                    [format!("../{rel}:/etc/squid/policy.conf:ro")]
                );
                // The instance's proxy is its loopback forward; its relay connects that to squid.
                assert_eq!(
                    proxied.expect("proxied instance")["environment"]["HTTPS_PROXY"],
                    "http://127.0.0.1:3128"
                );
                let relay =
                    strs(&compose["services"][format!("{}-proxied-relay", s.name)]["command"]);
                assert!(
                    relay.contains(&format!(
                        "unix:/run/bulkhead/sock/egress.sock={}-egress-proxy:3128",
                        s.name
                    )),
                    "{label}: {relay:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 2, "proxies checked: {checked}");
}

#[test]
fn connector_data_reaches_only_the_instances_that_run_its_tools() {
    let root = tests_dir().join("../..");
    let model =
        bulkhead_codegen::load(&root.join("specs"), &root).unwrap_or_else(|e| panic!("{e}"));
    let doc = file(&model, "compose/local.yaml");
    let mounts = |svc: &str| strs(&doc["services"][svc]["volumes"]);
    let has = |svc: &str, target: &str| mounts(svc).iter().any(|m| m.contains(target));
    // records (confidential tools): proxied and isolated only; security logs (secret): isolated.
    for (target, full, proxied, isolated) in [
        ("/var/lib/bulkhead/data/app_logs", true, true, true),
        (
            "/var/lib/bulkhead/data/records/records.db",
            false,
            true,
            true,
        ),
        ("/var/lib/bulkhead/data/security_logs", false, false, true),
    ] {
        assert_eq!(has("template", target), full, "template: {target}");
        assert_eq!(
            has("template-proxied", target),
            proxied,
            "proxied: {target}"
        );
        assert_eq!(
            has("template-isolated", target),
            isolated,
            "isolated: {target}"
        );
    }
    for m in mounts("template-isolated")
        .iter()
        .filter(|m| m.contains("/data/"))
    {
        assert!(m.ends_with(":ro"), "data is read-only: {m}");
    }
    // The instance reads the path from the variable the connector names.
    let env = &doc["services"]["template-isolated"]["environment"];
    assert_eq!(
        env["SECURITY_LOG_DIR"],
        "/var/lib/bulkhead/data/security_logs"
    );
    assert_eq!(
        env["RECORDS_DB"],
        "/var/lib/bulkhead/data/records/records.db"
    );
    assert!(
        doc["services"]["template"]["environment"]
            .get("SECURITY_LOG_DIR")
            .is_none()
    );
    // Secrets are files, never values.
    assert_eq!(env["WEBHOOK_TOKEN_FILE"], "/run/secrets/webhook_token");
    assert!(env.get("WEBHOOK_TOKEN").is_none());
    assert!(
        strs(&doc["services"]["template-isolated"]["secrets"])
            .contains(&"webhook_token".to_string())
    );
    assert!(doc["secrets"]["webhook_token"]["file"].is_string());
    // Variables keep the spec's own default.
    assert_eq!(
        env["WEBHOOK_URL"],
        "${WEBHOOK_URL:-https://hooks.example.com}"
    );
}

#[test]
fn client_entries_name_exactly_the_instances() {
    for (label, model) in models() {
        for d in model.deployments.iter().filter(|d| compose(d)) {
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
                // Desktop clients run `bulkhead connect` with one URL per instance, for compose
                // and for `bulkhead up`.
                for runner in ["compose", "up"] {
                    let claude = file(
                        &model,
                        &format!("clients/{}.{runner}.claude_desktop.json", d.name),
                    );
                    let vscode = file(&model, &format!("clients/{}.{runner}.vscode.json", d.name));
                    let cursor = file(&model, &format!("clients/{}.{runner}.cursor.json", d.name));
                    for entry in [
                        &claude["mcpServers"][&s.name],
                        &vscode["servers"][&s.name],
                        &cursor["mcpServers"][&s.name],
                    ] {
                        assert_eq!(entry["command"], "bulkhead");
                        let args = strs(&entry["args"]);
                        assert_eq!(args[..2], ["connect".to_string(), s.name.clone()]);
                        for (flag, suffix) in [
                            ("--url", ""),
                            ("--url-proxied", "-proxied"),
                            ("--url-isolated", "-isolated"),
                        ] {
                            let exists = compose["services"]
                                .get(format!("{}{suffix}", s.name))
                                .is_some();
                            assert_eq!(args.contains(&flag.to_string()), exists, "{label}: {flag}");
                        }
                        assert!(entry["env"]["BULKHEAD_TOKEN"].is_string());
                        if runner == "compose" {
                            // Each URL is a port compose publishes on 127.0.0.1.
                            let published: Vec<String> = compose["services"]
                                .as_object()
                                .expect("services")
                                .values()
                                .flat_map(|svc| svc.get("ports").map(strs).unwrap_or_default())
                                .collect();
                            for url in args.iter().filter(|a| a.starts_with("http://")) {
                                let port = url
                                    .trim_start_matches("http://127.0.0.1:")
                                    .trim_end_matches("/mcp");
                                assert!(
                                    published
                                        .iter()
                                        .any(|p| p.starts_with(&format!("127.0.0.1:{port}:"))),
                                    "{label}: {url} is not published ({published:?})"
                                );
                            }
                        }
                    }
                    assert_eq!(vscode["servers"][&s.name]["type"], "stdio");
                }
            }
        }
    }
}

#[test]
fn runtime_config_accepts_every_service_name_as_host() {
    for (label, model) in models() {
        for d in model.deployments.iter().filter(|d| compose(d)) {
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

#[test]
fn every_image_is_named_by_version_never_latest() {
    // A reviewed manifest that says `latest` (or no tag) does not decide what runs.
    for (label, model) in models() {
        let out = bulkhead_codegen::generate(&model);
        let mut seen = 0;
        for (path, text) in &out.files {
            for line in text.lines() {
                let Some((_, image)) = line.split_once("image: ") else {
                    continue;
                };
                let image = image.trim().trim_matches('"');
                let name = image.split('@').next().unwrap_or_default();
                let tag = name.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
                assert!(
                    !tag.is_empty() && !tag.contains('/') && tag != "latest",
                    "{label}: {}: `{image}`",
                    path.display()
                );
                seen += 1;
            }
        }
        assert!(
            seen > 0 || model.deployments.is_empty(),
            "{label}: no image lines"
        );
    }
}

#[test]
fn each_instance_runs_in_its_servers_trust_domain_and_the_review_names_them() {
    let (_, model) = models().remove(1);
    let doc = file(&model, "compose/prod.yaml");
    for (service, domain) in [
        ("vault", "prod"),
        ("vault-proxied", "prod"),
        ("vault-isolated", "prod"),
        ("notes", "notes-only"),
    ] {
        assert_eq!(
            doc["services"][service]["environment"]["BULKHEAD_TRUST_DOMAIN"], domain,
            "{service}"
        );
    }
    let out = bulkhead_codegen::generate(&model);
    let review = &out.files[Path::new("compose/prod.md")];
    assert!(
        review.contains("`notes-only` (notes); `prod` (vault)"),
        "{review}"
    );
}
