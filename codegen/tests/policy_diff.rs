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

/// A temporary project holding a copy of this project's specs.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_specs(dir.path());
    dir
}

/// Every weakening of the project at `head` against `base`, as its line.
fn lines(base: &Model, head: &Path) -> Vec<String> {
    weakenings(base, &load(head))
        .iter()
        .map(Weakening::line)
        .collect()
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
            "specs/deployments/cluster.yaml: instance-removed: server `template`: no `none` instance any more (was `template-isolated` in `cluster`, `template-isolated` in `local`)",
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

/// Writes server `name` with `tools` (YAML under `tools:`) and deploys it in `local` with
/// `entry` (YAML under its name).
fn deploy_new_server(dir: &Path, name: &str, tools: &str, entry: &str) {
    std::fs::write(
        dir.join(format!("specs/servers/{name}.yaml")),
        format!("name: {name}\ninstructions: A new server.\ntools:\n{tools}"),
    )
    .unwrap();
    edit(
        dir,
        "specs/deployments/local.yaml",
        "  third_party:\n",
        &format!("  {name}:\n{entry}  third_party:\n"),
    );
}

/// The trust relation (issue 34): a reader of private data and a sender kept apart by a trust
/// domain the base did not have. Each case is one change of the project's own specs.
#[test]
fn splitting_the_ratchet_is_a_weakening_however_it_is_done() {
    let base = load(project().path());

    // A new server with a `connect` tool over the same connector, in a domain of its own.
    let h = project();
    deploy_new_server(
        h.path(),
        "notifier",
        "  notify_team:\n    description: Post a message to a team channel.\n    permission: connect\n    context: default\n    sensitivity: public\n    uses: webhooks.notify\n",
        "    port: 8020\n    trust_domain: notify\n    egress: [hooks.example.com:443]\n",
    );
    let got = lines(&base, h.path());
    assert!(
        got.iter().any(|l| l.starts_with("ratchet-split: deployment `local`: tool `template.search_records` (confidential) and tool `notifier.notify_team` (connect) do not share a session level: trust domains `local` and `notify`")),
        "{got:#?}"
    );
    assert!(
        got.contains(
            &"trust-domain-added: deployment `local`: trust domain `notify` (servers notifier)"
                .to_string()
        ),
        "{got:#?}"
    );

    // The read side: a confidential tool moved to a new server in its own domain (the template
    // keeps its connect tool).
    let h = project();
    deploy_new_server(
        h.path(),
        "records_desk",
        "  search_records:\n    description: Search customer records by title.\n    permission: read\n    context: sql_query\n    sensitivity: confidential\n    uses: records.search\n",
        "    port: 8030\n    trust_domain: records\n",
    );
    let got = lines(&base, h.path());
    assert!(
        got.iter().any(|l| l.starts_with("ratchet-split: deployment `local`: tool `records_desk.search_records` (confidential) and tool `template.notify_team` (connect)")),
        "{got:#?}"
    );

    // Neutral: a new read tool of internal data in the existing domain splits nothing.
    let h = project();
    edit(
        h.path(),
        "specs/servers/template.yaml",
        "tools:\n",
        "tools:\n  list_files:\n    description: List your workspace.\n    permission: read\n    context: default\n    sensitivity: internal\n    uses: workspace.list\n",
    );
    let got = lines(&base, h.path());
    assert!(
        !got.iter()
            .any(|l| l.starts_with("ratchet-split") || l.starts_with("trust-domain-added")),
        "{got:#?}"
    );
}

/// What the model now holds (issue 34): the variable behind a `${VAR}` (its default unchanged),
/// a sandbox limit raised a hundredfold, and a lock's package swapped for a look-alike name are
/// each named.
#[test]
fn settings_as_written_and_the_locks_package_are_reviewed() {
    let base = load(project().path());
    let h = project();
    edit(
        h.path(),
        "specs/connectors/app_logs.yaml",
        "${APP_LOG_DIR:-data/logs}",
        "${SECURITY_LOG_DIR:-data/logs}",
    );
    edit(
        h.path(),
        "specs/connectors/clock.lock.json",
        "pypi:mcp-server-time==",
        "pypi:mcp-server-tlme==",
    );
    let python = std::fs::read_to_string(h.path().join("specs/connectors/python.yaml")).unwrap();
    let raised = python.replace("${PYTHON_PROCESSES:-64}", "${PYTHON_PROCESSES:-6400}");
    assert_ne!(python, raised);
    std::fs::write(h.path().join("specs/connectors/python.yaml"), raised).unwrap();
    let got = lines(&base, h.path());
    for want in [
        r#"settings-changed: connector `app_logs`: settings.dir: "${APP_LOG_DIR:-data/logs}" → "${SECURITY_LOG_DIR:-data/logs}""#,
        r#"settings-changed: connector `python`: settings.processes: "${PYTHON_PROCESSES:-64}" → "${PYTHON_PROCESSES:-6400}""#,
        "package-changed: connector `clock`: pypi:mcp-server-time==2026.10.19 → pypi:mcp-server-tlme==2026.10.19",
    ] {
        assert!(got.iter().any(|l| l == want), "missing {want}\n{got:#?}");
    }
}

/// A `/proc` for an upstream's jail (issue 56: its mount table names host paths) is named.
#[test]
fn a_proc_for_an_upstream_is_named() {
    let base = load(project().path());
    let h = project();
    edit(
        h.path(),
        "specs/connectors/clock.yaml",
        "  call_timeout_ms: \"${MCP_CALL_TIMEOUT_MS:-10000}\"\n",
        "  call_timeout_ms: \"${MCP_CALL_TIMEOUT_MS:-10000}\"\n  proc: true\n",
    );
    let got = lines(&base, h.path());
    let want = "settings-changed: connector `clock`: settings.proc: (unset) → true";
    assert!(got.iter().any(|l| l == want), "missing {want}\n{got:#?}");
}

/// The images an instance runs from (issue 34): another registry for the server image and
/// another digest for the proxy's are named; a new tag of the same repository is not.
#[test]
fn another_registry_or_digest_is_named_and_a_new_tag_is_not() {
    let base = load(project().path());
    let h = project();
    edit(
        h.path(),
        "specs/deployments/cluster.yaml",
        "  repository: registry.example.com/platform/bulkhead\n",
        "  repository: registry.example.net/platform/bulkhead\n",
    );
    edit(
        h.path(),
        "specs/deployments/cluster.yaml",
        "sha256:0e4b7c2a9f1d6e3b8c5a0f7d2e9b4c1a6f3d8e5b2a7c0f9d4e1b6a3c8f5d2e7b",
        "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    );
    let got = lines(&base, h.path());
    assert!(
        got.iter().any(|l| l.starts_with("image-changed: deployment `cluster` instance `template` (full): + registry.example.net/platform/bulkhead:0.1.0@")),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|l| l.starts_with("image-changed: deployment `cluster` instance `template-proxied` (proxied): registry.example.com/platform/bulkhead-egress-proxy:0.1.0@sha256:1111")),
        "{got:#?}"
    );
    let h = project();
    edit(
        h.path(),
        "specs/deployments/cluster.yaml",
        "  tag: \"0.1.0\"\n",
        "  tag: \"0.2.0\"\n",
    );
    let got = lines(&base, h.path());
    assert!(
        !got.iter().any(|l| l.starts_with("image-changed")),
        "{got:#?}"
    );
}

/// `auth-changed` names the field that changed with its old and new value, not the whole section
/// twice (issue 34's output).
#[test]
fn an_auth_change_names_the_field() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let base_dir = tempfile::tempdir().unwrap();
    copy_specs(base_dir.path());
    std::fs::copy(
        root.join("config.yaml"),
        base_dir.path().join("config.yaml"),
    )
    .unwrap();
    let h = project();
    std::fs::copy(root.join("config.yaml"), h.path().join("config.yaml")).unwrap();
    edit(
        h.path(),
        "config.yaml",
        "audience: ${BULKHEAD_AUDIENCE:-bulkhead}",
        "audience: ${BULKHEAD_AUDIENCE:-anyone}",
    );
    let got: Vec<String> = weakenings(&load(base_dir.path()), &load(h.path()))
        .iter()
        .map(Weakening::line)
        .filter(|l| l.starts_with("auth-changed"))
        .collect();
    assert_eq!(
        got,
        [r#"auth-changed: config.yaml auth.audience: "bulkhead" → "anyone""#],
        "{got:#?}"
    );
}

/// The weakenings of `head` against `base` that concern rate limits.
fn rate_lines(base: &Model, head: &Path) -> Vec<String> {
    lines(base, head)
        .into_iter()
        .filter(|l| l.contains("rate"))
        .collect()
}

/// A tool's own rate limit raised or removed, and a configured one raised or removed, are
/// weakenings; fewer calls or a longer period are not.
#[test]
fn a_raised_or_removed_rate_limit_is_a_weakening() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let with_config = |extra: &str| {
        let d = project();
        let text = std::fs::read_to_string(root.join("config.yaml")).unwrap();
        std::fs::write(d.path().join("config.yaml"), format!("{text}{extra}")).unwrap();
        d
    };
    let limits = "rate_limits:\n  per_user_tool: { calls: 25, per_seconds: 1 }\n  per_server: { calls: 500, per_seconds: 1 }\n";
    let base = with_config(limits);
    let base = load(base.path());

    let h = with_config(limits);
    let spec = "specs/servers/template.yaml";
    edit(
        h.path(),
        spec,
        "rate_limit: { calls: 30, per_seconds: 60 }",
        "rate_limit: { calls: 300, per_seconds: 60 }",
    );
    edit(
        h.path(),
        "config.yaml",
        "per_user_tool: { calls: 25, per_seconds: 1 }",
        "per_user_tool: { calls: 25, per_seconds: 1, burst: 40 }",
    );
    edit(
        h.path(),
        "config.yaml",
        "per_server: { calls: 500, per_seconds: 1 }",
        "",
    );
    let got = rate_lines(&base, h.path());
    assert_eq!(
        got,
        [
            "limit-raised: config.yaml: rate_limits.per_server 500 calls per 1 s → none",
            "limit-raised: config.yaml: rate_limits.per_user_tool 25 calls per 1 s → 25 calls per 1 s, burst 40",
            "rate-limit-raised: tool `template.notify_team`: 30 calls per 60 s → 300 calls per 60 s",
        ],
        "{got:#?}"
    );

    let h = with_config(limits);
    edit(
        h.path(),
        spec,
        "    rate_limit: { calls: 30, per_seconds: 60 }\n",
        "",
    );
    let got = rate_lines(&base, h.path());
    assert_eq!(
        got,
        [
            "rate-limit-raised: tool `template.notify_team`: 30 calls per 60 s → 25 calls per 1 s (rate_limits.per_user_tool of config.yaml)",
        ],
        "{got:#?}"
    );
    // A tool's own limit looser than the configured one it used to count under.
    let h = with_config(limits);
    edit(
        h.path(),
        spec,
        "    uses: workspace.read\n",
        "    uses: workspace.read\n    rate_limit: { calls: 100, per_seconds: 1 }\n",
    );
    let got = rate_lines(&base, h.path());
    assert_eq!(
        got,
        [
            "rate-limit-raised: tool `template.read_file`: 25 calls per 1 s (rate_limits.per_user_tool of config.yaml) → 100 calls per 1 s",
        ],
        "{got:#?}"
    );
    // A copy of a rate-limited tool counts its calls apart: the operation's budget per user
    // doubles, so the copy is a new capability even with the same limit.
    let h = with_config(limits);
    edit(
        h.path(),
        spec,
        "tools:\n",
        "tools:\n  notify_team_again:\n    description: Post a message to the team channel, again.\n    permission: connect\n    context: default\n    sensitivity: public\n    uses: webhooks.notify\n    rate_limit: { calls: 30, per_seconds: 60 }\n",
    );
    let got = lines(&base, h.path());
    assert!(
        got.iter()
            .any(|l| l.starts_with("new-capability: tool `template.notify_team_again`")),
        "{got:#?}"
    );
    // Tighter everywhere: nothing to report.
    let h = with_config(limits);
    edit(
        h.path(),
        spec,
        "rate_limit: { calls: 30, per_seconds: 60 }",
        "rate_limit: { calls: 10, per_seconds: 60 }",
    );
    edit(
        h.path(),
        "config.yaml",
        "per_user_tool: { calls: 25, per_seconds: 1 }",
        "per_user_tool: { calls: 10, per_seconds: 2 }",
    );
    let got = rate_lines(&base, h.path());
    assert!(got.is_empty(), "{got:#?}");
}

/// A key that stands for policy written as a literal (or under another variable) is named,
/// although it resolves to the same value as before.
#[test]
fn a_policy_key_written_as_a_literal_is_named() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let base = project();
    std::fs::copy(root.join("config.yaml"), base.path().join("config.yaml")).unwrap();
    let base = load(base.path());
    let h = project();
    std::fs::copy(root.join("config.yaml"), h.path().join("config.yaml")).unwrap();
    edit(
        h.path(),
        "config.yaml",
        "environment: ${BULKHEAD_ENV:-development}",
        "environment: development",
    );
    edit(
        h.path(),
        "config.yaml",
        "audience: ${BULKHEAD_AUDIENCE:-bulkhead}",
        "audience: bulkhead",
    );
    edit(
        h.path(),
        "config.yaml",
        "user: ${BULKHEAD_USER:-local}",
        "user: ${BULKHEAD_ADMIN_USER:-local}",
    );
    let got: Vec<String> = lines(&base, h.path())
        .into_iter()
        .filter(|l| l.contains("as written"))
        .collect();
    assert_eq!(
        got,
        [
            "config-changed: config.yaml auth.audience (as written): ${BULKHEAD_AUDIENCE:-bulkhead} → bulkhead",
            "config-changed: config.yaml environment (as written): ${BULKHEAD_ENV:-development} → development",
            "config-changed: config.yaml stdio.user (as written): ${BULKHEAD_USER:-local} → ${BULKHEAD_ADMIN_USER:-local}",
        ],
        "{got:#?}"
    );
}

/// Removing the only tool that needs the isolated instance takes the instance away with it, and
/// nothing then runs less isolated: no weakening (it was reported as `instance-removed`).
#[test]
fn removing_the_only_secret_tool_is_not_a_removed_instance() {
    let base_dir = project();
    let base = load(base_dir.path());
    let head_dir = project();
    let h = head_dir.path();
    edit(
        h,
        "specs/servers/template.yaml",
        "  search_security_logs:\n    description: Search the security team's authentication and key logs (secret, so the session moves to the isolated instance, which has no network at all).\n    permission: read\n    context: log_search\n    sensitivity: secret\n    uses: security_logs.search\n",
        "",
    );
    let got = lines(&base, h);
    assert!(
        !got.iter().any(|l| l.starts_with("instance-removed")),
        "{got:?}"
    );
}

/// Renaming a server (its spec and every deployment's entry) moves the same capabilities and
/// instances under a new name: no weakening (its instances were reported as new ones reaching
/// their egress).
#[test]
fn renaming_a_server_is_no_weakening() {
    let base_dir = project();
    let base = load(base_dir.path());
    let head_dir = project();
    let h = head_dir.path();
    edit(
        h,
        "specs/servers/third_party.yaml",
        "name: third_party",
        "name: outside_tools",
    );
    for d in [
        "specs/deployments/local.yaml",
        "specs/deployments/cluster.yaml",
    ] {
        edit(h, d, "  third_party:", "  outside_tools:");
    }
    let got = lines(&base, h);
    assert!(got.is_empty(), "{got:?}");
}

/// Turning inspection off is named, for a tool (its own `uninspected:`) and for every tool of a
/// connector (the connector's), with the reason; a reason that says nothing is refused by `check`.
#[test]
fn turning_inspection_off_is_a_named_weakening_and_needs_a_reason() {
    let base_dir = project();
    let base = load(base_dir.path());
    let head = project();
    edit(
        head.path(),
        "specs/servers/template.yaml",
        "    uses: webhooks.notify\n",
        "    uses: webhooks.notify\n    uninspected: the team channel receives deploy tokens on purpose; rotated hourly\n",
    );
    let got = lines(&base, head.path());
    assert!(
        got.iter().any(|l| l.starts_with("inspection-off: tool `template.notify_team`: inspected → uninspected (\"the team channel")),
        "{got:#?}"
    );
    let head = project();
    edit(
        head.path(),
        "specs/connectors/workspace.yaml",
        "operations:",
        "uninspected: the workspace holds only what the agent wrote itself, by decision\noperations:",
    );
    let got = lines(&base, head.path());
    assert!(
        got.iter()
            .any(|l| l.starts_with("inspection-off: tool `template.read_file`")),
        "{got:#?}"
    );
    let head = project();
    edit(
        head.path(),
        "specs/servers/template.yaml",
        "    uses: webhooks.notify\n",
        "    uses: webhooks.notify\n    uninspected: n/a\n",
    );
    let err = bulkhead_codegen::load(&head.path().join("specs"), head.path()).expect_err("refused");
    assert!(
        err.to_string().contains("does not say what was decided"),
        "{err}"
    );
}

/// Moving a tool to another server deployed in the same trust domains (every deployment that
/// serves one serves the other, with the same egress) moves what runs, not what reaches it:
/// no weakening.
#[test]
fn moving_a_tool_between_servers_of_one_trust_domain_is_no_weakening() {
    let base_dir = project();
    let base = load(base_dir.path());
    let head_dir = project();
    let h = head_dir.path();
    let text = std::fs::read_to_string(h.join("specs/servers/third_party.yaml")).unwrap();
    let start = text.find("  convert_meeting_time:").unwrap();
    let end = text.find("  annotated_message:").unwrap();
    let tool = text[start..end].to_string();
    edit(h, "specs/servers/third_party.yaml", &tool, "");
    edit(
        h,
        "specs/servers/template.yaml",
        "tools:\n",
        &format!("tools:\n{tool}"),
    );
    let got = lines(&base, h);
    assert!(got.is_empty(), "{got:#?}");
}
