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
