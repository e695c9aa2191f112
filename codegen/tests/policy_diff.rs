//! The policy review's rules on the project's own specs, copied and edited in a temporary
//! folder: each kind of weakening is reported, tightenings and unchanged specs are not (the
//! same over real git revisions, through the CLI: `tests/integration/policy_review.rs`).

use bulkhead_codegen::model::Model;
use bulkhead_codegen::review::{Weakening, resolve, review};

fn weakenings(base: &Model, head: &Model) -> Vec<Weakening> {
    review(&resolve(base), &resolve(head)).weakenings
}
use std::path::Path;

fn copy_specs(to: &Path) {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    for sub in ["servers", "connectors", "deployments", "schema"] {
        let from = root.join("specs").join(sub);
        std::fs::create_dir_all(to.join("specs").join(sub)).unwrap();
        for e in std::fs::read_dir(&from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join("specs").join(sub).join(e.file_name())).unwrap();
        }
    }
}

fn edit(dir: &Path, rel: &str, from: &str, to: &str) {
    let p = dir.join(rel);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains(from), "{rel} has no `{from}`");
    std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
}

fn load(dir: &Path) -> bulkhead_codegen::model::Model {
    bulkhead_codegen::load(&dir.join("specs"), dir).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_kind_of_weakening_is_reported_and_nothing_else() {
    let base_dir = tempfile::tempdir().unwrap();
    copy_specs(base_dir.path());
    let base = load(base_dir.path());
    assert!(weakenings(&base, &base).is_empty());

    let head_dir = tempfile::tempdir().unwrap();
    copy_specs(head_dir.path());
    let h = head_dir.path();
    // Secret → confidential: the isolated instance disappears with it.
    edit(
        h,
        "specs/connectors/security_logs.yaml",
        "sensitivity: secret",
        "sensitivity: confidential",
    );
    edit(
        h,
        "specs/servers/template.yaml",
        "    sensitivity: secret\n    uses: security_logs.search",
        "    sensitivity: confidential\n    uses: security_logs.search",
    );
    edit(
        h,
        "specs/servers/template.yaml",
        "    permission: read\n    context: default\n    sensitivity: internal\n    uses: workspace.read",
        "    permission: write\n    context: default\n    sensitivity: internal\n    uses: workspace.read",
    );
    edit(
        h,
        "specs/deployments/local.yaml",
        "proxied_egress: [hooks.example.com:443]",
        "proxied_egress: [hooks.example.com:443, api.example.com:443]",
    );
    // A tightening is not reported.
    edit(
        h,
        "specs/servers/template.yaml",
        "    sensitivity: internal\n    uses: app_logs.search",
        "    sensitivity: confidential\n    uses: app_logs.search",
    );
    edit(
        h,
        "specs/connectors/app_logs.yaml",
        "sensitivity: internal",
        "sensitivity: confidential",
    );
    let head = load(h);
    let got: Vec<String> = weakenings(&base, &head)
        .into_iter()
        .map(|w| format!("{}: {}", w.file, w.line()))
        .collect();
    assert_eq!(
        got,
        [
            "specs/deployments/local.yaml: egress-widened: deployment `local` instance `template-proxied` (proxied): + api.example.com:443",
            "specs/deployments/cluster.yaml: instance-removed: server `template`: no `none` instance any more (was `template-isolated`)",
            "specs/deployments/cluster.yaml: mount-added: deployment `cluster` instance `template-proxied` (proxied): + data/security-logs (dir, ro)",
            "specs/deployments/local.yaml: mount-added: deployment `local` instance `template-proxied` (proxied): + data/security-logs (dir, ro)",
            "specs/servers/template.yaml: permission-widened: tool `template.read_file`: read → write",
            "specs/connectors/security_logs.yaml: sensitivity-lowered: connector `security_logs`: secret → confidential",
            "specs/servers/template.yaml: sensitivity-lowered: tool `template.search_security_logs`: secret → confidential",
        ]
    );
}

/// A deployment whose containers now run without the engine's system-call filter (because a
/// server in it runs jails) is a weakening of its own, reported per instance.
#[test]
fn a_container_without_the_engines_seccomp_filter_is_reported() {
    let base_dir = tempfile::tempdir().unwrap();
    copy_specs(base_dir.path());
    let b = base_dir.path();
    for file in [
        "specs/deployments/local.yaml",
        "specs/deployments/cluster.yaml",
    ] {
        edit(
            b,
            file,
            "  third_party:\n    port: 8010\n    egress: [docs.example.com:443]\n    proxied_egress: [docs.example.com:443]\n",
            "",
        );
    }
    let base = load(b);
    let head_dir = tempfile::tempdir().unwrap();
    copy_specs(head_dir.path());
    let head = load(head_dir.path());
    let got: Vec<String> = weakenings(&base, &head)
        .into_iter()
        .filter(|w| w.rule == "seccomp-off")
        .map(|w| format!("{}: {}", w.file, w.line()))
        .collect();
    let off = "seccomp-off: deployment";
    let why = "its container runs without the engine's system-call filter (it runs jails, which install their own)";
    assert_eq!(
        got,
        [
            format!(
                "specs/deployments/cluster.yaml: {off} `cluster` instance `third_party-proxied` (proxied): {why}"
            ),
            format!(
                "specs/deployments/cluster.yaml: {off} `cluster` instance `third_party` (full): {why}"
            ),
            format!(
                "specs/deployments/local.yaml: {off} `local` instance `third_party-proxied` (proxied): {why}"
            ),
            format!(
                "specs/deployments/local.yaml: {off} `local` instance `third_party` (full): {why}"
            ),
        ]
    );
}
