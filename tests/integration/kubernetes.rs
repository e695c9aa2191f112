//! The generated Kubernetes manifests of the example deployment, validated by
//! `kubernetes-validate --strict` (PyPI; it bundles the official OpenAPI schemas, and `--strict`
//! rejects fields the API does not define), with a negative control proving the validator
//! rejects what it should; and the kustomization naming exactly the files beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

const VALIDATOR: &str = "kubernetes-validate==1.37.0";

/// A venv with the validator, made once under target/.
fn validator() -> PathBuf {
    super::harness::pip_venv("k8s-venv", &[VALIDATOR]).join("bin/kubernetes-validate")
}

fn validate(bin: &Path, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(bin)
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .args(files)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && !text.contains("ERROR"), text)
}

#[test]
fn the_example_manifests_pass_strict_validation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/kubernetes/cluster");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let kustomization = dir.join("kustomization.yaml");
    let manifests: Vec<PathBuf> = files
        .iter()
        .filter(|p| **p != kustomization)
        .cloned()
        .collect();
    assert!(manifests.len() >= 20, "{manifests:?}");

    let bin = validator();
    let (ok, text) = validate(&bin, &manifests);
    assert!(ok, "{text}");
    assert_eq!(
        text.matches(" passed for resource ").count(),
        manifests.len(),
        "{text}"
    );

    // Negative control: an unknown field and a wrong type are rejected.
    let tmp = tempfile::tempdir().unwrap();
    let deployment =
        std::fs::read_to_string(dir.join("template-isolated-deployment.yaml")).unwrap();
    let unknown = tmp.path().join("unknown.yaml");
    std::fs::write(
        &unknown,
        deployment.replace("  replicas:", "  replicaz: 1\n  replicas:"),
    )
    .unwrap();
    let (ok, text) = validate(&bin, &[unknown]);
    assert!(!ok, "an unknown field passed: {text}");
    let mistyped = tmp.path().join("mistyped.yaml");
    std::fs::write(
        &mistyped,
        deployment.replace("runAsNonRoot: true", "runAsNonRoot: \"yes\""),
    )
    .unwrap();
    let (ok, text) = validate(&bin, &[mistyped]);
    assert!(!ok, "a wrong type passed: {text}");

    // The kustomization lists exactly the manifests beside it.
    let k = std::fs::read_to_string(&kustomization).unwrap();
    let listed: Vec<&str> = k
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.trim_matches('"'))
        .collect();
    let present: Vec<String> = manifests
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, present);
}

const ANALYZER: &str = "network-config-analyzer==2.1.0";

/// `nca --connectivity` on the manifests in `dir` with the cluster around them: one line per
/// allowed connection, `src => dst : conns`.
fn connectivity(dir: &Path) -> Vec<String> {
    let nca = super::harness::pip_venv("nca-venv", &[ANALYZER]).join("bin/nca");
    let peers =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubernetes/cluster-peers.yaml");
    let out = Command::new(nca)
        .arg("--connectivity")
        .arg(dir)
        .arg("--resource_list")
        .arg(dir)
        .arg("--resource_list")
        .arg(&peers)
        .args(["--output_format", "txt_no_fw_rules"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<String> = text
        .lines()
        .filter(|l| l.contains(" => "))
        .map(str::to_string)
        .collect();
    assert!(
        lines.len() > 10,
        "network-config-analyzer said: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

/// network-config-analyzer on the generated NetworkPolicies: a `none` instance sends nothing
/// anywhere, DNS and the store included, and a `proxied` one nothing but its egress proxy; only
/// the agents (on its port) and its store relay (on the tunnel port) reach either, and the store
/// relays reach the store. Negative control: the DNS
/// rule as it was (every pod of the namespace) shows the isolated instance reaching kube-dns.
#[test]
fn network_config_analyzer_finds_no_egress_from_isolated_pods() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/kubernetes/cluster");
    let lines = connectivity(&dir);
    let from_isolated: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("bulkhead-cluster/template-isolated[Deployment] => "))
        .collect();
    assert!(from_isolated.is_empty(), "{from_isolated:#?}");
    for want in [
        "agents/agent[Pod] => bulkhead-cluster/template-isolated[Deployment] : {protocols:TCP,dst_ports:8000}",
        "bulkhead-cluster/template-isolated-store-relay[Deployment] => bulkhead-cluster/template-isolated[Deployment] : {protocols:TCP,dst_ports:5433}",
        "bulkhead-cluster/template-isolated-store-relay[Deployment] => store/postgres[Pod] : {protocols:TCP,dst_ports:5432}",
        "bulkhead-cluster/template-proxied[Deployment] => bulkhead-cluster/template-egress-proxy[Deployment] : {protocols:TCP,dst_ports:3128}",
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "missing {want}: {lines:#?}"
        );
    }
    // A proxied pod reaches its proxy and nothing else (no DNS, no store).
    let from_proxied: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("bulkhead-cluster/template-proxied[Deployment] => "))
        .collect();
    assert_eq!(from_proxied.len(), 1, "{from_proxied:#?}");
    // Nothing but their relays reaches the tunnel ports.
    let tunnel: Vec<&String> = lines
        .iter()
        .filter(|l| l.ends_with("dst_ports:5433}"))
        .collect();
    assert!(
        tunnel.len() == 3
            && tunnel
                .iter()
                .all(|l| l.contains("-store-relay[Deployment] => ")),
        "{tunnel:#?}"
    );

    let old = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            std::fs::copy(&p, old.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    let dns = old.path().join("netpol-dns.yaml");
    let text = std::fs::read_to_string(&dns).unwrap();
    let start = text.find("    matchExpressions:").expect("the exclusion");
    let end = text.find("  policyTypes:").unwrap();
    std::fs::write(&dns, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let lines = connectivity(old.path());
    assert!(
        lines.iter().any(|l| l.starts_with(
            "bulkhead-cluster/template-isolated[Deployment] => kube-system/coredns[Pod]"
        )),
        "the control should reach DNS: {lines:#?}"
    );
}
