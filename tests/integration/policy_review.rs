//! `bulkhead check --against REV` over real git revisions: each change a reviewer could be walked
//! around with (issue 22's list, and more) fails with a distinct exit code and names the
//! weakening; harmless changes pass; an acknowledged weakening passes; a base that does not load
//! is walked back, and when nothing loads the check fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Exit code of an unacknowledged weakening.
const WEAKENED: i32 = 3;
/// Exit code of a base that cannot be resolved.
const BASE_UNRESOLVED: i32 = 4;
/// Exit code of a head whose specs do not load.
const HEAD_ERRORS: i32 = 1;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=review",
            "-c",
            "user.email=review@example.com",
        ])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository holding this project's `specs/` and `config.yaml`, committed once (tag `base`).
fn repo() -> (tempfile::TempDir, PathBuf) {
    repo_with("")
}

/// [`repo`], with `edit` run in the project before the first commit.
fn repo_with(edit: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"));
    sh(
        dir.path(),
        &format!(
            "mkdir project && cp -r '{0}/specs' '{0}/config.yaml' project/",
            src.display()
        ),
    );
    if !edit.is_empty() {
        sh(&root, edit);
    }
    git(&root, &["init", "-q"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "base"]);
    git(&root, &["tag", "base"]);
    (dir, root)
}

/// `bulkhead check --root ROOT --against HEAD~1`: (exit code, stdout and stderr).
fn check_against_parent(root: &Path) -> (i32, String) {
    check_against_parent_with(root, &[])
}

/// [`check_against_parent`] with more arguments.
fn check_against_parent_with(root: &Path, more: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["check", "--root"])
        .arg(root)
        .args(["--against", "HEAD~1"])
        .args(more)
        .output()
        .expect("run bulkhead check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Applies `script` on a fresh copy of the base, commits, and reviews against `HEAD~1`.
fn review(root: &Path, script: &str) -> (i32, String) {
    git(root, &["reset", "-q", "--hard", "base"]);
    git(root, &["clean", "-qfdx"]);
    sh(root, script);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "--allow-empty", "-m", "change"]);
    check_against_parent(root)
}

/// (name, edit, the lines the report must hold). Each is a weakening issue 22 found printed as
/// "nothing weakened", or one more a reviewer could be walked around with.
const WEAKENINGS: &[(&str, &str, &[&str])] = &[
    (
        "a tool's approval removed",
        "sed -i '/^    approval: always$/d' specs/servers/template.yaml",
        &[
            "weakened: approval-weakened: tool `template.delete_file`: always → none (calls run without asking)",
        ],
    ),
    (
        "a tool's approval narrowed to paths outside a folder",
        r#"sed -i 's#^    approval: always$#    approval:\n      when:\n        - path_outside: { argument: path, prefix: /workspace/drafts/ }#' specs/servers/template.yaml"#,
        &[
            "weakened: approval-weakened: tool `template.delete_file`: always → `path` outside /workspace/drafts/",
        ],
    ),
    (
        "the proxy image's digest removed (a tag can be pushed again)",
        "sed -i '/^  digest: sha256:0e4b7c2a/d' specs/deployments/cluster.yaml",
        &[
            "weakened: image-unpinned: deployment `cluster` instance `template-proxied` (proxied): registry.example.com/platform/bulkhead-egress-proxy:0.1.0: the digest was removed (was sha256:0e4b7c2a",
        ],
    ),
    (
        "a CA bundle of its own for the webhook connector: named as the file it is",
        r##"sed -i 's#ca_file: .*#ca_file: "${WEBHOOK_CA_FILE:-certs/internal-ca.pem}"#' specs/connectors/webhooks.yaml"##,
        &[
            "weakened: trust-changed: connector `webhooks`: CA bundle (system) → certs/internal-ca.pem",
            "weakened: mount-added: deployment `local` instance `template` (full): + certs/internal-ca.pem (ca_file, ro)",
        ],
    ),
    (
        "a new server deployed: its instance has no counterpart, and is compared with nothing",
        r#"cat > specs/servers/mirror.yaml <<'Y'
name: mirror
instructions: The logs again.
tools:
  search_logs:
    description: Search the application logs with a regular expression, optionally in a time window.
    permission: read
    context: log_search
    sensitivity: internal
    uses: app_logs.search
Y
sed -i 's/^  third_party:/  mirror:\n    port: 8020\n  third_party:/' specs/deployments/local.yaml"#,
        &[
            "weakened: new-capability: tool `mirror.search_logs`",
            "weakened: mount-added: deployment `local` instance `mirror` (full): + ",
        ],
    ),
    (
        "a connector renamed and moved to another host in one change, its secret dropped",
        r#"git mv specs/connectors/webhooks.yaml specs/connectors/alerts.yaml
sed -i 's/^name: webhooks/name: alerts/; s#https://hooks.example.com#https://alerts.example.org#; /^secrets:/d; s/WEBHOOK_TOKEN/HOOK_VALUE/' specs/connectors/alerts.yaml
sed -i 's/uses: webhooks\./uses: alerts./' specs/servers/template.yaml"#,
        &[
            "weakened: location-changed: connector `alerts` (renamed from `webhooks`): https://hooks.example.com → https://alerts.example.org",
            "weakened: secret-unprotected: connector `alerts` (renamed from `webhooks`)",
        ],
    ),
    (
        "a copy of an existing tool in a new server (its own ratchet, unreviewed)",
        r#"cat > specs/servers/mirror.yaml <<'Y'
name: mirror
instructions: The logs again.
tools:
  search_logs:
    description: Search the application logs with a regular expression, optionally in a time window.
    permission: read
    context: log_search
    sensitivity: internal
    uses: app_logs.search
Y"#,
        &["weakened: new-capability: tool `mirror.search_logs`: read internal, runs"],
    ),
    (
        "a tool renamed and lowered from confidential to public",
        r#"sed -i 's/^  load_sensitive_dataset:/  load_dataset:/' specs/servers/template.yaml
python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("    sensitivity: confidential\n    handler: rust","    sensitivity: public\n    handler: rust")
open(p,'w').write(t)
P"#,
        &[
            "weakened: sensitivity-lowered: tool `template.load_dataset` (renamed from `template.load_sensitive_dataset`): confidential → public",
        ],
    ),
    (
        "a connector renamed and lowered with its tools",
        r#"git mv specs/connectors/records.yaml specs/connectors/recs.yaml
sed -i 's/^name: records/name: recs/; s/^sensitivity: confidential/sensitivity: public/' specs/connectors/recs.yaml
sed -i 's/uses: records\./uses: recs./; s/sensitivity: confidential/sensitivity: public/' specs/servers/template.yaml"#,
        &[
            "weakened: sensitivity-lowered: connector `recs` (renamed from `records`): confidential → public",
            "weakened: sensitivity-lowered: tool `template.search_records`: confidential → public",
            "weakened: mount-added: deployment `local` instance `template` (full): + data/records.db (path, ro)",
        ],
    ),
    (
        "an http connector pointed at another host with allowed_hosts widened",
        r#"sed -i 's#base_url: .*#base_url: "${WEBHOOK_URL:-https://collector.example.net}"\n  allowed_hosts: ["collector.example.net:443", "10.0.0.5:80"]#' specs/connectors/webhooks.yaml"#,
        &[
            "weakened: location-changed: connector `webhooks`: https://hooks.example.com → https://collector.example.net",
            "weakened: reach-widened: connector `webhooks`: + 10.0.0.5:80, collector.example.net:443",
            "weakened: runs-changed: tool `template.notify_team`",
        ],
    ),
    (
        "the sandbox given a way out (egress), its tool made connect",
        r#"sed -i 's/^  max_runs: .*/&\n  egress: ["pypi.org:443"]/' specs/connectors/python.yaml
python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("    permission: write\n    context: default\n    sensitivity: internal\n    uses: python.run","    permission: connect\n    context: default\n    sensitivity: internal\n    uses: python.run")
open(p,'w').write(t)
P"#,
        &["weakened: reach-widened: connector `python`: + pypi.org:443"],
    ),
    (
        "a tool moved to handler: rust",
        r#"python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("    sensitivity: confidential\n    uses: records.search","    sensitivity: confidential\n    handler: rust\n    params:\n      query:\n        type: string\n        description: q")
open(p,'w').write(t)
P"#,
        &[
            "weakened: runs-changed: tool `template.search_records`: `sqlite data/records.db: SELECT",
        ],
    ),
    (
        "a context preset's max_chars raised in config.yaml",
        "printf 'context:\\n  presets:\\n    sql_query:\\n      max_chars: 100000000\\n' >> config.yaml",
        &[
            "weakened: limit-raised: config.yaml: context.presets.sql_query.max_chars default → 100000000",
        ],
    ),
    (
        "allowed_origins and allowed_hosts set to *",
        r#"sed -i 's#^  allowed_hosts: .*#  allowed_hosts: ["*"]#; s#^  allowed_origins: .*#  allowed_origins: ["*"]#' config.yaml"#,
        &[
            "weakened: allowlist-widened: config.yaml http.allowed_hosts: holds a wildcard: *",
            "weakened: allowlist-widened: config.yaml http.allowed_origins: holds a wildcard: *",
        ],
    ),
    (
        "the deployment renamed with its egress widened",
        r#"git mv specs/deployments/local.yaml specs/deployments/local2.yaml
sed -i 's/^name: local/name: local2/; s/proxied_egress: \[hooks.example.com:443\]/proxied_egress: [hooks.example.com:443, evil.example.net:443]\n    internal_ranges: [10.0.0.0\/8]/' specs/deployments/local2.yaml"#,
        &[
            "weakened: egress-widened: deployment `local2` instance `template-proxied` (proxied) (deployment renamed from `local`): + evil.example.net:443",
            "weakened: internal-range-widened: deployment `local2` instance `template-proxied` (proxied) (deployment renamed from `local`): + 10.0.0.0/8",
            "weakened: trust-domain-changed: deployment `local2` instance `template` (full) (deployment renamed from `local`): local → local2",
        ],
    ),
    (
        "two commits: the first breaks the specs, the second lowers",
        r#"echo "garbage: [" >> specs/servers/crm.yaml
git add -A && git -c user.name=r -c user.email=r@example.com commit -qm break
git checkout HEAD~1 -- specs/servers/crm.yaml
sed -i 's/sensitivity: confidential/sensitivity: public/' specs/servers/crm.yaml specs/connectors/crm_db.yaml"#,
        &[
            "note: specs/ at `HEAD~1` do not load",
            "compared with 1 back along first parents",
            "weakened: sensitivity-lowered: connector `crm_db`: confidential → public",
            "weakened: sensitivity-lowered: tool `crm.get_account`: confidential → public",
        ],
    ),
    (
        "a new tool that reaches the network somewhere new",
        r#"cat >> specs/connectors/webhooks.yaml <<'Y'
  page:
    description: Page the on-call engineer.
    method: POST
    path: /page
    params:
      message:
        type: string
        description: Message text
        max_length: 2000
    body: [message]
Y
python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("tools:\n","tools:\n  page_oncall:\n    description: Page the on-call engineer.\n    permission: connect\n    context: default\n    sensitivity: public\n    uses: webhooks.page\n",1)
open(p,'w').write(t)
P"#,
        &[
            "weakened: new-capability: tool `template.page_oncall`: connect public, runs http https://hooks.example.com: POST /page",
        ],
    ),
    (
        "a SQL literal added to a filter (the old key dropped literals)",
        r#"python3 - <<'P'
p='specs/connectors/records.yaml'; t=open(p).read()
t=t.replace("    sql: SELECT id, title, owner FROM records WHERE id = :id","    sql: SELECT id, title, owner FROM records WHERE id = :id OR 'x' = 'x' -- the owner's record")
open(p,'w').write(t)
P"#,
        &["weakened: runs-changed: resource `template.records://{id}`"],
    ),
    (
        "an argument's minimum removed",
        r#"python3 - <<'P'
p='specs/connectors/records.yaml'; t=open(p).read()
t=t.replace("        minimum: 1\n        maximum: 200","        maximum: 200",1)
open(p,'w').write(t)
P"#,
        &["weakened: argument-loosened: tool `template.search_records`: `limit` minimum 1 → none"],
    ),
    (
        "a parameter bound to the caller's claim made one the model sets",
        "sed -i '/        from_claim: sub/d' specs/connectors/crm_db.yaml",
        &[
            "weakened: argument-loosened: tool `crm.my_accounts`: `owner` set from claim `sub` → the model",
        ],
    ),
    (
        "the state store and its trust domain changed in config.yaml",
        "sed -i 's#^  dir: ${BULKHEAD_STATE_DIR:-.bulkhead/state}#  dir: ${BULKHEAD_STATE_DIR:-/tmp/fresh-state}#' config.yaml",
        &[
            "weakened: config-changed: config.yaml state.dir: \".bulkhead/state\" → \"/tmp/fresh-state\"",
        ],
    ),
    (
        "an argument's limit raised",
        r#"python3 - <<'P'
p='specs/connectors/records.yaml'; t=open(p).read()
import re
t=re.sub(r"maximum: (\d+)", "maximum: 100000", t, count=1)
open(p,'w').write(t)
P"#,
        &["weakened: argument-loosened: tool `template.search_records`: `limit` maximum"],
    ),
    (
        "the isolated instance removed by lowering the highest level",
        r#"sed -i 's/^sensitivity: secret/sensitivity: confidential/' specs/connectors/security_logs.yaml
python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("    sensitivity: secret\n    uses: security_logs.search","    sensitivity: confidential\n    uses: security_logs.search")
open(p,'w').write(t)
P"#,
        &[
            "weakened: instance-removed: server `template`: no `none` instance any more (was `template-isolated` in `cluster`, `template-isolated` in `local`)",
            "weakened: sensitivity-lowered: tool `template.search_security_logs`: secret → confidential",
        ],
    ),
];

/// Settings of `config.yaml` the review did not know before its keys were classified by the
/// engine's schema (issue 57): each is named.
const CONFIG_WEAKENINGS: &[(&str, &str, &[&str])] = &[
    (
        "the token service's provider issuer, audience and key",
        r#"python3 - <<'P'
p='config.yaml'; t=open(p).read()
s=t.index("  provider:")
u=t[s:].replace("issuer: ${BULKHEAD_ISSUER:-bulkhead-dev}","issuer: https://evil.example.net",1).replace("audience: ${BULKHEAD_AUDIENCE:-bulkhead}","audience: anyone",1).replace("${BULKHEAD_DEV_SECRET:-bulkhead-development-secret-not-for-production}","${OTHER_SECRET:-another-development-secret}",1)
open(p,'w').write(t[:s]+u)
P"#,
        &[
            "weakened: auth-changed: config.yaml token_service.provider.issuer: \"bulkhead-dev\" → \"https://evil.example.net\"",
            "weakened: auth-changed: config.yaml token_service.provider.audience: \"bulkhead\" → \"anyone\"",
            "weakened: auth-changed: config.yaml token_service.provider.keys: ",
        ],
    ),
    (
        "the variable behind the auth key renamed (same default)",
        "sed -i '0,/BULKHEAD_DEV_SECRET/s//BULKHEAD_OTHER_SECRET/' config.yaml",
        &["weakened: config-changed: config.yaml auth.keys (as written): "],
    ),
    (
        "the token lifetime raised, a signing key file and login redirect origins and claims added",
        "sed -i 's/^  ttl_secs: 600$/  ttl_secs: 86400\\n  signing_key_file: \\/tmp\\/other.pem\\n  claims: [email, groups]\\n  login:\\n    redirect_origins: [\"https:\\/\\/evil.example.net\"]/' config.yaml",
        &[
            "weakened: limit-raised: config.yaml: token_service.ttl_secs 600 → 86400",
            "weakened: auth-changed: config.yaml token_service.signing_key_file: (none) → \"/tmp/other.pem\"",
            "weakened: auth-changed: config.yaml token_service.claims: [\"email\"] → [\"email\",\"groups\"]",
            "weakened: allowlist-widened: config.yaml token_service.login.redirect_origins: + https://evil.example.net",
        ],
    ),
    (
        "approvals last longer and use another key; the audit log another signing key",
        "printf 'approvals:\n  expiry_secs: 86400\n  key_file: /tmp/approvals.key\naudit:\n  signing_key: /tmp/audit.key\n  chain: false\n' >> config.yaml",
        &[
            "weakened: limit-raised: config.yaml: approvals.expiry_secs 300 → 86400",
            "weakened: config-changed: config.yaml approvals.key_file: (none) → \"/tmp/approvals.key\"",
            "weakened: config-changed: config.yaml audit.signing_key: (none) → \"/tmp/audit.key\"",
            "weakened: config-changed: config.yaml audit.chain: on → off",
        ],
    ),
    (
        "an approval narrowed by a prefix that climbs back out",
        r#"sed -i 's#^    approval: always$#    approval:\n      when:\n        - path_outside: { argument: path, prefix: /workspace/drafts/../ }#' specs/servers/template.yaml"#,
        &[
            "weakened: approval-weakened: tool `template.delete_file`: always → `path` outside /workspace/drafts/../",
        ],
    ),
    (
        "the owners of the acknowledgements narrowed to one",
        "sed -i '/^owners:/,/^[a-z]/{/^  - /d}' specs/policy-acks.yaml && sed -i 's/^owners:.*/owners: [\"@the-author\"]/' specs/policy-acks.yaml",
        &["weakened: owners-narrowed: specs/policy-acks.yaml owners: - "],
    ),
    (
        "the project's own code that runs a tool",
        "mkdir -p src/handlers && printf '// sends the rows somewhere\\n' > src/handlers/template.rs",
        &["weakened: code-changed: src/handlers/template.rs: none → "],
    ),
];

#[test]
fn every_config_setting_and_process_weakening_is_named() {
    each_fails_naming(CONFIG_WEAKENINGS);
}

/// Runs each `(name, edit, lines)` on a fresh change of one repository: each must exit 3 and
/// print every one of its lines.
fn each_fails_naming(cases: &[(&str, &str, &[&str])]) {
    let (_dir, root) = repo();
    let mut failures = Vec::new();
    for (name, script, lines) in cases {
        let (code, text) = review(&root, script);
        let missing: Vec<&&str> = lines.iter().filter(|l| !text.contains(**l)).collect();
        if code != WEAKENED || !missing.is_empty() {
            failures.push(format!(
                "{name}: exit {code} (want {WEAKENED}), missing {missing:?}\n{text}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Changes that weaken nothing.
const HARMLESS: &[(&str, &str)] = &[
    (
        "reformatting and reordering",
        r#"python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("    permission: read\n","    permission: 'read'\n")
open(p,'w').write(t)
P
sed -i 's/^  allowed_hosts: \[localhost, 127.0.0.1, "::1"\]/  allowed_hosts:\n    - "::1"\n    - localhost\n    - 127.0.0.1/' config.yaml"#,
    ),
    (
        "comments and descriptions",
        r#"sed -i '1a # a comment a reviewer added' specs/servers/template.yaml specs/connectors/records.yaml config.yaml
sed -i 's/^instructions: .*/instructions: Reworded instructions./' specs/servers/template.yaml"#,
    ),
    (
        "SQL layout and comments",
        r#"python3 - <<'P'
p='specs/connectors/records.yaml'; t=open(p).read()
t=t.replace("    sql: SELECT id, title, owner FROM records WHERE id = :id","    sql: |-\n      SELECT id, title, owner -- the row\n        FROM records\n       WHERE id = :id")
open(p,'w').write(t)
P"#,
    ),
    (
        "a new, stricter tool over an existing operation",
        r#"python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("tools:\n","tools:\n  find_records:\n    description: Search the customer records, again.\n    permission: read\n    context: sql_query\n    sensitivity: secret\n    uses: records.search\n",1)
open(p,'w').write(t)
P"#,
    ),
    (
        "tightenings",
        r#"sed -i 's/^sensitivity: internal/sensitivity: confidential/' specs/connectors/app_logs.yaml
python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
t=t.replace("    sensitivity: internal\n    uses: app_logs.search","    sensitivity: confidential\n    uses: app_logs.search")
open(p,'w').write(t)
P
sed -i 's/proxied_egress: \[hooks.example.com:443\]/proxied_egress: []/' specs/deployments/local.yaml"#,
    ),
    (
        "a rename that changes nothing else",
        "sed -i 's/^  read_file:/  read_workspace_file:/' specs/servers/template.yaml",
    ),
    (
        "a tool moved between two servers of one trust domain",
        r#"python3 - <<'P'
a='specs/servers/third_party.yaml'; t=open(a).read()
s=t.index("  convert_meeting_time:"); e=t.index("  annotated_message:")
tool=t[s:e]; open(a,'w').write(t[:s]+t[e:])
b='specs/servers/template.yaml'; u=open(b).read()
open(b,'w').write(u.replace("tools:\n","tools:\n"+tool,1))
P"#,
    ),
    (
        "a server renamed (its spec and every deployment's entry)",
        "sed -i 's/^name: third_party/name: outside_tools/' specs/servers/third_party.yaml && sed -i 's/^  third_party:/  outside_tools:/' specs/deployments/*.yaml",
    ),
    (
        "the only secret tool removed (its isolated instance goes with it)",
        r#"python3 - <<'P'
p='specs/servers/template.yaml'; t=open(p).read()
s=t.index("  search_security_logs:"); e=t.index("  load_sensitive_dataset:")
open(p,'w').write(t[:s]+t[e:])
P"#,
    ),
    (
        "http.max_body_bytes lowered below the runtime's default",
        "sed -i 's/^  stateful: true$/&\\n  max_body_bytes: 65536/' config.yaml",
    ),
    (
        "neutral settings changed (telemetry batching, a timeout)",
        "printf 'telemetry:\n  batch_delay_ms: 250\nlimits:\n  max_concurrent_calls: 8\n' >> config.yaml",
    ),
];

#[test]
fn every_weakening_fails_the_review_and_is_named() {
    each_fails_naming(WEAKENINGS);
}

#[test]
fn harmless_changes_pass_the_review() {
    let (_dir, root) = repo();
    let mut failures = Vec::new();
    for (name, script) in HARMLESS {
        let (code, text) = review(&root, script);
        if code != 0 || text.contains("weakened:") || text.contains("note:") {
            failures.push(format!("{name}: exit {code}\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Changes that make the head's specs fail to load: the check fails (exit 1) with the
/// diagnostic, so there is nothing to walk around (cloud metadata as a connector's host, writes
/// and side effects hidden in read SQL, credentials of a production deployment's connectors
/// taken out of `secrets:`).
#[test]
fn metadata_hosts_and_writes_hidden_in_read_sql_stop_the_check() {
    let (_dir, root) = repo();
    for (script, expect) in [
        (
            "sed -i 's#    sql: SELECT id, title, owner FROM records WHERE id = :id#    sql: WITH d AS (DELETE FROM records WHERE id = :id RETURNING id, title, owner) SELECT id, title, owner FROM d#' specs/connectors/records.yaml",
            "writes through `records.get` but declares `read`",
        ),
        (
            r#"sed -i 's#base_url: .*#base_url: "${WEBHOOK_URL:-http://169.254.169.254}"\n  allowed_hosts: ["169.254.169.254:80"]#' specs/connectors/webhooks.yaml"#,
            "link-local addresses (cloud metadata, 169.254.0.0/16) are never a destination",
        ),
        (
            "sed -i \"s#    sql: SELECT id, name, owner FROM accounts WHERE id = :id#    sql: SELECT id, name, owner, pg_notify/**/('c', name) FROM accounts WHERE id = :id#\" specs/connectors/crm_db.yaml",
            "calls `pg_notify`",
        ),
        (
            r#"python3 - <<'P'
p='specs/connectors/crm_db.yaml'; t=open(p).read()
t=t.replace("    sql: SELECT id, name, owner FROM accounts WHERE id = :id","    sql: |-\n      SELECT id, name, owner FROM accounts WHERE id = :id AND E'\\'' <> set_config('role', 'x', false) -- '")
open(p,'w').write(t)
P"#,
            "calls `set_config`",
        ),
        (
            "sed -i '/^secrets:/d' specs/connectors/*.yaml",
            "`WEBHOOK_TOKEN` looks like a credential, but `webhooks` reads it as a plain environment variable",
        ),
    ] {
        let (code, text) = review(&root, script);
        assert_eq!(code, HEAD_ERRORS, "{script}\n{text}");
        assert!(text.contains(expect), "{script}\n{text}");
    }
}

#[test]
fn an_acknowledged_weakening_passes_and_a_different_one_does_not() {
    let (_dir, root) = repo();
    let lower = "sed -i 's/sensitivity: confidential/sensitivity: public/' specs/servers/crm.yaml specs/connectors/crm_db.yaml";
    let (code, text) = review(&root, lower);
    assert_eq!(code, WEAKENED, "{text}");
    let lines: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("weakened: "))
        .map(|l| l.rsplit_once(" (").map_or(l, |(line, _)| line).to_string())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    let mut acks = String::from("acks:\n");
    for l in &lines {
        acks.push_str(&format!(
            "  - weakening: {}\n    reason: CRM data is public since TICKET-1\n",
            serde_json::to_string(l).unwrap()
        ));
    }
    let acked = format!(
        "{lower}\ncat > specs/policy-acks.yaml <<'A'\nowners: [\"@bulkhead/security-reviewers\"]\n{acks}A"
    );
    let (code, text) = review(&root, &acked);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(
            "acknowledged: sensitivity-lowered: connector `crm_db`: confidential → public"
        ),
        "{text}"
    );
    // They do not cover another weakening made beside them.
    let other = format!(
        "{acked}\nsed -i 's/^sensitivity: internal/sensitivity: public/' specs/connectors/app_logs.yaml\npython3 - <<'P'\np='specs/servers/template.yaml'; t=open(p).read()\nt=t.replace(\"    sensitivity: internal\\n    uses: app_logs.search\",\"    sensitivity: public\\n    uses: app_logs.search\")\nopen(p,'w').write(t)\nP"
    );
    let (code, text) = review(&root, &other);
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains(
            "weakened: sensitivity-lowered: tool `template.search_logs`: internal → public"
        ),
        "{text}"
    );
    // An acknowledgement without a reason accepts nothing: the check fails.
    let (code, text) = review(
        &root,
        &format!(
            "{lower}\nprintf 'acks:\\n  - weakening: \"sensitivity-lowered: x\"\\n    reason: \" \"\\n' > specs/policy-acks.yaml"
        ),
    );
    assert_eq!(code, HEAD_ERRORS, "{text}");
    assert!(text.contains("gives no reason"), "{text}");
}

#[test]
fn a_base_that_never_loads_fails_the_review() {
    let (_dir, root) = repo_with("echo 'garbage: [' >> specs/servers/crm.yaml");
    sh(
        &root,
        &format!(
            "cp '{}/specs/servers/crm.yaml' specs/servers/crm.yaml",
            env!("CARGO_MANIFEST_DIR")
        ),
    );
    git(&root, &["commit", "-qam", "fixed"]);
    let (code, text) = check_against_parent(&root);
    assert_eq!(code, BASE_UNRESOLVED, "{text}");
    assert!(text.contains("the policy cannot be reviewed"), "{text}");
}

/// Acknowledgements that mean something (issue 34): one this change adds must match a weakening
/// of this change (a stale one fails, exit 3); a reason must say something ("." is refused);
/// acknowledgements the base already had are neither applied to nothing nor printed as notes.
#[test]
fn an_added_acknowledgement_must_match_this_change_and_say_why() {
    let (_dir, root) = repo();
    // Stale: an acknowledgement of a weakening this change does not make.
    let (code, text) = review(
        &root,
        "cat >> specs/policy-acks.yaml <<'A'\n  - weakening: \"sensitivity-lowered: connector `crm_db`: confidential → public\"\n    reason: \"CRM data is public since TICKET-1, approved by the data owner\"\nA",
    );
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains("stale: specs/policy-acks.yaml adds an acknowledgement of `sensitivity-lowered: connector `crm_db`: confidential → public`"),
        "{text}"
    );
    // A reason of one character accepts nothing.
    let lower = "sed -i 's/sensitivity: confidential/sensitivity: public/' specs/connectors/crm_db.yaml specs/servers/crm.yaml";
    let (code, text) = review(
        &root,
        &format!(
            "{lower}\ncat >> specs/policy-acks.yaml <<'A'\n  - weakening: \"sensitivity-lowered: connector `crm_db`: confidential → public\"\n    reason: \".\"\nA"
        ),
    );
    assert_eq!(code, HEAD_ERRORS, "{text}");
    assert!(text.contains("gives no reason a reader can use"), "{text}");
    // Filler accepts nothing, however many words it has.
    let (code, text) = review(
        &root,
        &format!(
            "{lower}\ncat >> specs/policy-acks.yaml <<'A'\n  - weakening: \"sensitivity-lowered: connector `crm_db`: confidential → public\"\n    reason: \"approved as discussed with the team, ok\"\nA"
        ),
    );
    assert_eq!(code, HEAD_ERRORS, "{text}");
    assert!(text.contains("gives no reason a reader can use"), "{text}");
    // The base's own acknowledgements are not this change's: no note about them.
    let (code, text) = review(&root, "echo '# a comment' >> specs/servers/crm.yaml");
    assert_eq!(code, 0, "{text}");
    assert!(
        !text.contains("note:") && !text.contains("stale:"),
        "{text}"
    );
}

/// An acknowledgement the base already holds was another change's: when the same weakening
/// comes back (a tool's approval removed, restored, and removed again), the line repeats but
/// this change must say anew why; a new reason on the same line does.
#[test]
fn an_acknowledgement_kept_from_the_base_covers_nothing_of_this_change() {
    let old_ack = "  - weakening: \"approval-weakened: tool `template.delete_file`: always → none (calls run without asking)\"\n    reason: \"TICKET-3: deletions were reversible during the migration window\"\n";
    let (_dir, root) = repo_with(&format!("cat >> specs/policy-acks.yaml <<'A'\n{old_ack}A"));
    let remove = "sed -i '/^    approval: always$/d' specs/servers/template.yaml";
    let (code, text) = review(&root, remove);
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains("weakened: approval-weakened: tool `template.delete_file`: always → none"),
        "{text}"
    );
    let again = format!(
        "{remove}\nsed -i 's/TICKET-3: deletions were reversible during the migration window/TICKET-11: deletions are backed up hourly since the new store/' specs/policy-acks.yaml"
    );
    let (code, text) = review(&root, &again);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("acknowledged: approval-weakened: tool `template.delete_file`"),
        "{text}"
    );
}

/// `scripts/review` in `root` (as `.ci/run` runs it) with `env`: (exit code, what it printed).
fn ci_review(root: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/review");
    let mut cmd = Command::new(&script);
    cmd.current_dir(root)
        .env("BULKHEAD", env!("CARGO_BIN_EXE_bulkhead"))
        .env_remove("BULKHEAD_BASE_REF")
        .env_remove("BULKHEAD_TARGET_BRANCH")
        .env_remove("BULKHEAD_PREVIOUS_HEAD")
        .env_remove("BULKHEAD_PUSH")
        .env_remove("CI_COMMIT_BEFORE_SHA")
        .env_remove("CI_PIPELINE_SOURCE")
        .env_remove("GITHUB_EVENT_NAME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run scripts/review");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The whole change, judged (issue 34): a weakening followed by a harmless commit passes a review
/// of the last commit alone, and is caught against the merge base with the target branch — also
/// from a clone of depth 1, which the review deepens; where the base cannot be seen at all the
/// review fails (exit 4) instead of skipping.
#[test]
fn the_whole_change_is_reviewed_from_the_merge_base_even_in_a_shallow_clone() {
    let (dir, root) = repo();
    git(&root, &["branch", "-q", "main", "base"]);
    git(&root, &["checkout", "-q", "-b", "feature"]);
    sh(
        &root,
        "sed -i 's/sensitivity: confidential/sensitivity: public/' specs/connectors/crm_db.yaml specs/servers/crm.yaml",
    );
    git(&root, &["commit", "-qam", "lower crm"]);
    sh(&root, "echo '# harmless' >> specs/servers/crm.yaml");
    git(&root, &["commit", "-qam", "a harmless follow-up"]);
    let (code, text) = ci_review(&root, &[]);
    assert_eq!(code, 0, "the last commit alone hides it: {text}");
    let (code, text) = ci_review(&root, &[("BULKHEAD_TARGET_BRANCH", "main")]);
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains("weakened: sensitivity-lowered: connector `crm_db`: confidential → public"),
        "{text}"
    );
    // A push of both commits: judged from the remote's previous head, every commit it brings.
    let previous = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "base"])
            .current_dir(&root)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let (code, text) = ci_review(
        &root,
        &[
            ("BULKHEAD_PUSH", "1"),
            ("BULKHEAD_PREVIOUS_HEAD", previous.trim()),
        ],
    );
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains("every commit since the previous head"),
        "{text}"
    );
    // A push build that does not say where the push started cannot be reviewed.
    let (code, text) = ci_review(&root, &[("GITHUB_EVENT_NAME", "push")]);
    assert_eq!(code, BASE_UNRESOLVED, "{text}");
    assert!(text.contains("names no previous head"), "{text}");
    let (code, text) = ci_review(
        &root,
        &[(
            "CI_COMMIT_BEFORE_SHA",
            "0000000000000000000000000000000000000000",
        )],
    );
    assert_eq!(code, BASE_UNRESOLVED, "{text}");
    // A clone of depth 1 (how many CI systems check out): deepened from its origin first.
    let shallow = dir.path().join("shallow");
    let url = format!("file://{}", root.display());
    sh(
        dir.path(),
        &format!(
            "git clone -q --depth 1 --branch feature '{url}' shallow && git -C shallow fetch -q --depth 1 origin main:refs/remotes/origin/main"
        ),
    );
    let (code, text) = ci_review(&shallow, &[("BULKHEAD_TARGET_BRANCH", "main")]);
    assert_eq!(code, WEAKENED, "{text}");
    // No origin to deepen from: the base cannot be seen, and the review says so and fails.
    let alone = dir.path().join("alone");
    sh(
        dir.path(),
        &format!(
            "git clone -q --depth 1 --branch feature '{url}' alone && git -C alone remote remove origin"
        ),
    );
    let (code, text) = ci_review(&alone, &[]);
    assert_eq!(code, BASE_UNRESOLVED, "{text}");
    assert!(
        text.contains("cannot see the base revision HEAD~1"),
        "{text}"
    );
}

/// The project's own code is not described by the policy: a changed file is a `code-changed`
/// weakening bound to its content on both sides; acknowledged, that content passes, and a
/// further edit of the file is a new line.
#[test]
fn changed_handler_code_needs_a_person_and_an_acknowledgement() {
    let (_dir, root) = repo();
    let write = "mkdir -p src/handlers && printf '// sends the rows somewhere\\n' > src/handlers/template.rs";
    let (code, text) = review(&root, write);
    assert_eq!(code, WEAKENED, "{text}");
    let line = text
        .lines()
        .filter_map(|l| l.strip_prefix("weakened: "))
        .find_map(|l| l.strip_suffix(" (src/handlers/template.rs)"))
        .expect("a code-changed line")
        .to_string();
    assert!(
        line.starts_with("code-changed: src/handlers/template.rs: none → ")
            && line.ends_with("a person must read it"),
        "{line}"
    );
    let ack = format!(
        "cat >> specs/policy-acks.yaml <<'A'\n  - weakening: '{line}'\n    reason: 'read by Ana: the handler only formats rows, TICKET-9'\nA"
    );
    let (code, text) = review(&root, &format!("{write}\n{ack}"));
    assert_eq!(code, 0, "{text}");
    let (code, text) = review(
        &root,
        &format!("{write}\nprintf 'fn more() {{}}\\n' >> src/handlers/template.rs\n{ack}"),
    );
    assert_eq!(code, WEAKENED, "another content is not covered: {text}");
    let (_, text) = review(&root, "echo '# a comment' >> specs/servers/crm.yaml");
    assert!(!text.contains("code-changed"), "{text}");
}

/// A change to the rules (vocab's placement, the generator, the review) is judged by the base's
/// rules: `--base-generated` holds what the base's generator made of this change's specs, and
/// every file of the committed `generated/` that differs is a `rules-changed` weakening — here a
/// compose file that lost its proxied instance while no spec changed.
#[test]
fn a_change_to_the_rules_is_judged_by_the_bases_rules() {
    let (_dir, root) = repo();
    let by_base = tempfile::tempdir().unwrap();
    let model = bulkhead_codegen::load(&root.join("specs"), &root).unwrap();
    bulkhead_codegen::generate(&model)
        .write_into_whole(by_base.path())
        .unwrap();
    let run = |root: &Path| {
        check_against_parent_with(
            root,
            &["--base-generated".as_ref(), by_base.path().as_os_str()],
        )
    };
    // The generated files as the base's rules make them: nothing to say.
    sh(
        &root,
        &format!("cp -r '{}' generated", by_base.path().display()),
    );
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "generated"]);
    let (code, out) = run(&root);
    assert_eq!(code, 0, "{out}");

    // The rules changed (as a `Confidential => Full` placement would): the proxied instance is
    // gone from the compose file, and no spec says so.
    let compose = root.join("generated/compose/local.yaml");
    let text = std::fs::read_to_string(&compose).unwrap();
    assert!(text.contains("template-proxied"), "{text}");
    std::fs::write(
        &compose,
        text.replace("template-proxied", "template-full-2"),
    )
    .unwrap();
    git(&root, &["add", "-A"]);
    git(
        &root,
        &[
            "commit",
            "-qm",
            "vocab: confidential data on the full instance",
        ],
    );
    let (code, out) = run(&root);
    assert_eq!(code, WEAKENED, "{out}");
    assert!(
        out.contains("weakened: rules-changed: generated/compose/local.yaml: differs from what the base's rules make of these specs"),
        "{out}"
    );
}

/// A second connector at an existing one's place, named to sort before it, is new: the review
/// does not say the existing one was renamed (names are matched before places).
#[test]
fn a_new_connector_at_an_existing_place_is_not_taken_for_a_rename() {
    let (_dir, root) = repo();
    let (code, text) = review(
        &root,
        "sed 's/^name: records/name: archive/' specs/connectors/records.yaml > specs/connectors/archive.yaml",
    );
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("renamed from"), "{text}");
}

/// The engine is part of what is reviewed: a change of its code in the repository, of the
/// version `Cargo.lock` pins, of an override in `Cargo.toml` or of `build.rs` exits 3 naming
/// `engine-changed`, with the ids on both sides (an acknowledgement covers that change only);
/// a spec-only change next to it passes.
#[test]
fn a_changed_engine_is_named_and_needs_an_acknowledgement() {
    let (_dir, root) = repo_with(
        r#"mkdir -p engine/src vendored
printf '[package]\nname = "bulkhead"\nversion = "0.1.0"\nedition = "2024"\n' > engine/Cargo.toml
printf '//! The engine.\npub fn admit() -> bool { false }\n' > engine/src/lib.rs
printf '[package]\nname = "acme"\nversion = "0.1.0"\nedition = "2024"\n\n[dependencies]\nbulkhead = { path = "engine" }\nbulkhead-codegen = "0.1.0"\n' > Cargo.toml
printf 'version = 4\n\n[[package]]\nname = "bulkhead"\nversion = "0.1.0"\n\n[[package]]\nname = "bulkhead-codegen"\nversion = "0.1.0"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"\n' > Cargo.lock
printf 'fn main() {\n    bulkhead_codegen::build();\n}\n' > build.rs"#,
    );
    let cases: &[(&str, &str, &str)] = &[
        (
            "the engine's code",
            "sed -i 's/false/true/' engine/src/lib.rs",
            "weakened: engine-changed: crate `bulkhead`'s code: engine/ at ",
        ),
        (
            "the generator's version in Cargo.lock",
            "sed -i '/^name = \"bulkhead-codegen\"$/{n;s/0.1.0/0.2.0/}' Cargo.lock",
            "weakened: engine-changed: crate `bulkhead-codegen` in Cargo.lock: 0.1.0 (registry+https://github.com/rust-lang/crates.io-index) sha256 aaaaaaaaaaaa → 0.2.0 (registry+",
        ),
        (
            "build.rs",
            "printf 'fn main() {}\\n' > build.rs",
            "weakened: engine-changed: build.rs: ",
        ),
        (
            "a [patch] of the engine",
            "printf '\\n[patch.crates-io]\\nbulkhead-codegen = { path = \"vendored\" }\\n' >> Cargo.toml",
            "weakened: engine-changed: Cargo.toml [patch.crates-io] bulkhead-codegen: none → ",
        ),
    ];
    for (what, script, line) in cases {
        let (code, out) = review(&root, script);
        assert_eq!(code, WEAKENED, "{what}: {out}");
        assert!(out.contains(line), "{what}: {out}");
    }
    // A spec-only change beside the engine is judged by the specs alone.
    let (code, out) = review(
        &root,
        "sed -i 's/^instructions: .*/instructions: Reworded./' specs/servers/template.yaml",
    );
    assert_eq!(code, 0, "{out}");
    // An acknowledgement of the exact line passes that change, and only that one.
    let (_, out) = review(&root, "sed -i 's/false/true/' engine/src/lib.rs");
    let weakened = out
        .lines()
        .find_map(|l| l.strip_prefix("weakened: "))
        .and_then(|l| l.rsplit_once(" (").map(|(w, _)| w.to_string()))
        .expect("a weakening line");
    let acks = root.parent().unwrap().join("acks.yaml");
    std::fs::write(
        &acks,
        format!(
            "owners: [\"@bulkhead/security-reviewers\"]\nacks:\n  - weakening: \"{weakened}\"\n    reason: \"the engine admits now\"\n"
        ),
    )
    .unwrap();
    let ack = format!(
        "sed -i 's/false/true/' engine/src/lib.rs && cp '{}' specs/policy-acks.yaml",
        acks.display()
    );
    let (code, out) = review(&root, &ack);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("acknowledged: engine-changed: crate `bulkhead`'s code"),
        "{out}"
    );
    let other = ack.replace("s/false/true/", "s/false/!false/");
    let (code, out) = review(&root, &other);
    assert_eq!(
        code, WEAKENED,
        "another change of the engine is not covered: {out}"
    );
}

/// Key material a change commits is a weakening naming the file: a PEM private key, a key file
/// by its name, a provider token in a config file; an ordinary file is not.
#[test]
fn committed_key_material_is_named_with_its_path() {
    let (_dir, root) = repo();
    let (code, text) = review(
        &root,
        "mkdir -p deploy && printf -- '-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oXkV2nnRpWDfoAoGCCqGSM49\\nAwEHoUQDQgAE0oJk1xR3bNqW4fTMuX9mHyKb7aP2LsVuDqZ8nWcR1vE5tYhJ2Kx\\n-----END EC PRIVATE KEY-----\\n' > deploy/signing.pem",
    );
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains(
            "weakened: secret-committed: deploy/signing.pem: holds what rule `private-key` finds (value sha256 "
        ),
        "{text}"
    );
    let (code, text) = review(&root, "printf 'anything\\n' > tls.key");
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains("weakened: secret-committed: tls.key: a key file, by its name"),
        "{text}"
    );
    let (code, text) = review(
        &root,
        "printf 'token: ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8\\n' > ci.env",
    );
    assert_eq!(code, WEAKENED, "{text}");
    assert!(
        text.contains(
            "weakened: secret-committed: ci.env: holds what rule `github-pat` finds (value sha256 "
        ),
        "{text}"
    );
    // Acknowledged, that value passes; another token written into the same file is a new line.
    let line = text
        .lines()
        .filter_map(|l| l.strip_prefix("weakened: "))
        .find_map(|l| l.strip_suffix(" (ci.env)"))
        .expect("the line")
        .to_string();
    let ack = format!(
        "cat >> specs/policy-acks.yaml <<'A'\n  - weakening: '{line}'\n    reason: 'a revoked token kept as a test fixture, TICKET-7'\nA"
    );
    let one = "printf 'token: ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8\\n' > ci.env";
    let (code, text) = review(&root, &format!("{one}\n{ack}"));
    assert_eq!(code, 0, "{text}");
    let two = "printf 'other: ghp_Zq8vrT2kLm4xZq8vrT2kLm4xZq8vrT2kLm4xZq8v\\n' >> ci.env";
    let (code, text) = review(&root, &format!("{one}\n{two}\n{ack}"));
    assert_eq!(code, WEAKENED, "{text}");
    assert_eq!(
        text.matches("weakened: secret-committed: ci.env").count(),
        1,
        "{text}"
    );
    let (code, text) = review(
        &root,
        "printf 'region: eu-west-1\\nrequest_id: 550e8400-e29b-41d4-a716-446655440000\\n' > notes.yaml",
    );
    assert_eq!(code, 0, "{text}");
}
