//! Properties of the Kubernetes manifests, for the project's own specs: every pod is selected by
//! exactly the NetworkPolicies its role and mode require; a `none` pod can reach nothing at all
//! (not DNS, not the store: its store relay dials in); a proxied pod nothing but its proxy; no Secret values
//! anywhere; per-mode workspace claims mounted as compose mounts them; hardened pods.

use bulkhead_codegen::source::SourceFile;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn manifests() -> BTreeMap<String, Value> {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let model = bulkhead_codegen::load(&root.join("specs"), root).unwrap_or_else(|e| panic!("{e}"));
    let out = bulkhead_codegen::generate(&model);
    out.files
        .iter()
        .filter_map(|(path, text)| {
            let p = path.to_string_lossy();
            let name = p.strip_prefix("kubernetes/cluster/")?;
            if !name.ends_with(".yaml") || name == "kustomization.yaml" {
                return None;
            }
            let file = SourceFile::in_memory(name, text);
            let doc =
                bulkhead_codegen::yaml::parse(&file).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            Some((name.to_string(), doc.to_json()))
        })
        .collect()
}

/// A label selector's meaning (Kubernetes': `matchLabels` and `matchExpressions` all hold; a
/// `NotIn` holds where the label is absent). An operator this test does not know selects nothing
/// it can check, so it fails the test.
fn selects(selector: &Value, labels: &Value) -> bool {
    let by_label = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| labels[k] == *v));
    let by_expression = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let value = labels[e["key"].as_str().unwrap_or("")].as_str();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => value.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                other => panic!("unknown selector operator {other:?}"),
            }
        });
    by_label && by_expression
}

/// (policy name → spec) for each NetworkPolicy.
fn policies(all: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    all.values()
        .filter(|d| d["kind"] == "NetworkPolicy")
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                d["spec"].clone(),
            )
        })
        .collect()
}

/// Names of the policies that select `labels`, and the egress rules they allow.
fn applied(pols: &BTreeMap<String, Value>, labels: &Value) -> (BTreeSet<String>, Vec<Value>) {
    let mut names = BTreeSet::new();
    let mut egress = Vec::new();
    for (name, spec) in pols {
        if selects(&spec["podSelector"], labels) {
            names.insert(name.clone());
            egress.extend(spec["egress"].as_array().cloned().unwrap_or_default());
        }
    }
    (names, egress)
}

fn violations(all: &BTreeMap<String, Value>) -> Vec<String> {
    let mut bad = Vec::new();
    let pols = policies(all);
    let dns = json!({
        "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    });
    let store = json!({
        "to": [{"namespaceSelector": {"matchLabels": {"bulkhead.dev/state-store": "true"}}}],
        "ports": [{"protocol": "TCP", "port": 5432}],
    });
    for (file, d) in all {
        if d["kind"] == "Secret" {
            bad.push(format!("{file}: a Secret in the manifests"));
        }
        if d["kind"] != "Deployment" {
            continue;
        }
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let role = labels["bulkhead.dev/role"].as_str().unwrap_or("");
        let mode = labels["bulkhead.dev/mode"].as_str().unwrap_or("");
        let server = labels["bulkhead.dev/server"].as_str().unwrap_or("");
        let name = d["metadata"]["name"].as_str().unwrap_or("");
        let (names, egress) = applied(&pols, labels);
        let mut want: BTreeSet<String> = ["default-deny".to_string(), name.to_string()].into();
        match (role, mode) {
            // No DNS, and the store only over tunnels that arrive (`none`: nothing out at all;
            // `proxied`: its proxy only).
            ("instance", "none") | ("instance", "proxied") => {}
            ("instance", _) | ("store-relay", _) => {
                want.insert("dns".into());
                want.insert("state-store".into());
            }
            ("egress-proxy", _) => {
                want.insert("dns".into());
            }
            (other, _) => bad.push(format!("{file}: unknown role {other}")),
        }
        if names != want {
            bad.push(format!("{file}: selected by {names:?}, want {want:?}"));
        }
        let extra: Vec<&Value> = egress
            .iter()
            .filter(|r| **r != dns && **r != store)
            .collect();
        match (role, mode) {
            ("instance", "none") if !egress.is_empty() => {
                bad.push(format!("{file}: a none pod with egress {egress:?}"));
            }
            ("instance", "proxied") => {
                for r in &extra {
                    let to_proxy = r["to"].as_array().is_some_and(|t| {
                        t.iter().all(|peer| {
                            peer["podSelector"]["matchLabels"]["bulkhead.dev/role"]
                                == "egress-proxy"
                                && peer["podSelector"]["matchLabels"]["bulkhead.dev/server"]
                                    == server
                                && peer.get("ipBlock").is_none()
                        })
                    });
                    if !to_proxy || r["ports"] != json!([{"protocol": "TCP", "port": 3128}]) {
                        bad.push(format!("{file}: a proxied pod with egress {r:?}"));
                    }
                }
            }
            _ => {}
        }
        let pod = &d["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        for c in pod["containers"].as_array().into_iter().flatten() {
            if pod["securityContext"]["runAsNonRoot"] != true
                || c["securityContext"]["readOnlyRootFilesystem"] != true
                || c["securityContext"]["allowPrivilegeEscalation"] != false
                || c["securityContext"]["capabilities"]["drop"] != json!(["ALL"])
                || c["resources"]["limits"].is_null()
            {
                bad.push(format!("{file}: container {} not hardened", c["name"]));
            }
        }
        for e in c["env"].as_array().cloned().unwrap_or_default() {
            let n = e["name"].as_str().unwrap_or("");
            let secretish = n.contains("TOKEN")
                || n.contains("SECRET")
                || n.contains("DATABASE_URL")
                || n == "BULKHEAD_STATE_STORE";
            if secretish && !n.ends_with("_FILE") && e.get("valueFrom").is_none() {
                bad.push(format!("{file}: credential {n} as a value"));
            }
        }
        // Per-mode data: own workspaces read-write, lower read-only, never a higher mode's.
        if role == "instance" {
            let rank = |m: &str| ["full", "proxied", "none"].iter().position(|x| *x == m);
            let own = rank(mode).unwrap_or(0);
            let mut writes_own = false;
            for m in c["volumeMounts"].as_array().cloned().unwrap_or_default() {
                let v = m["name"].as_str().unwrap_or("");
                let Some((_, by)) = v.rsplit_once("-ws-") else {
                    continue;
                };
                let r = rank(by).unwrap_or(9);
                let ro = m["readOnly"] == true;
                if r > own {
                    bad.push(format!(
                        "{file}: mounts {v}, written by a more isolated instance"
                    ));
                } else if r < own && !ro {
                    bad.push(format!("{file}: mounts {v} read-write"));
                } else if r == own && !ro {
                    writes_own = true;
                }
            }
            if !writes_own {
                bad.push(format!("{file}: no workspace claim of its own"));
            }
        }
    }
    bad
}

#[test]
fn every_pod_gets_exactly_the_policies_and_data_of_its_mode() {
    let all = manifests();
    assert!(all.len() >= 20);
    let bad = violations(&all);
    assert!(bad.is_empty(), "{bad:#?}");
    // The example has all three modes and a proxy.
    let modes: BTreeSet<String> = all
        .values()
        .filter_map(|d| d["spec"]["template"]["metadata"]["labels"]["bulkhead.dev/mode"].as_str())
        .map(String::from)
        .collect();
    assert_eq!(modes, ["full", "none", "proxied"].map(String::from).into());
    // The proxy runs the same policy compose mounts.
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let on_disk =
        std::fs::read_to_string(root.join("generated/proxy/local-template.squid.conf")).unwrap();
    let cm = &all["template-egress-proxy-policy.yaml"]["data"]["policy.conf"];
    assert!(
        on_disk.ends_with(cm.as_str().unwrap()),
        "the ConfigMap's policy differs from generated/proxy/"
    );
}

#[test]
fn the_property_check_catches_each_violation() {
    let all = manifests();
    type Mutation = (&'static str, fn(&mut BTreeMap<String, Value>));
    let mutations: [Mutation; 5] = [
        ("egress for none", |m| {
            m.get_mut("netpol-template-isolated.yaml").unwrap()["spec"]["egress"] =
                json!([{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]);
        }),
        ("proxied straight out", |m| {
            m.get_mut("netpol-template-proxied.yaml").unwrap()["spec"]["egress"][0]["to"] =
                json!([{"ipBlock": {"cidr": "0.0.0.0/0"}}]);
        }),
        ("no default deny", |m| {
            m.remove("netpol-default-deny.yaml");
        }),
        ("full mounts the isolated workspaces", |m| {
            let c = &mut m.get_mut("template-deployment.yaml").unwrap()["spec"]["template"]["spec"]
                ["containers"][0];
            c["volumeMounts"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "template-ws-none", "mountPath": "/x", "readOnly": true}));
        }),
        ("a store URL as a value", |m| {
            let c = &mut m.get_mut("template-deployment.yaml").unwrap()["spec"]["template"]["spec"]
                ["containers"][0];
            c["env"][0] = json!({"name": "BULKHEAD_STATE_STORE", "value": "postgres://u:p@h/db"});
        }),
    ];
    for (what, mutate) in mutations {
        let mut m = all.clone();
        mutate(&mut m);
        assert!(!violations(&m).is_empty(), "{what} went unnoticed");
    }
}
