//! Golden diagnostics: every folder under `tests/ui/` is a bad spec tree, and its
//! `expected.stderr` is the exact rendered output. `BLESS=1` rewrites the expected files.

use bulkhead_codegen::BuildError;
use std::path::{Path, PathBuf};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn cases() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(tests_dir().join("ui"))
        .expect("tests/ui exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The rendered diagnostics of one case, or why it did not fail as a bad spec must.
fn render(case: &Path) -> Result<String, String> {
    match bulkhead_codegen::load(case, &tests_dir()) {
        Ok(_) => Err("the specs loaded without errors".to_string()),
        Err(BuildError::Specs(d)) => Ok(d.render()),
        Err(other) => Err(format!("not a spec error: {other}")),
    }
}

#[test]
fn ui_cases_match_expected_stderr() {
    let bless = std::env::var_os("BLESS").is_some();
    let cases = cases();
    assert!(cases.len() >= 24, "only {} ui cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap_or_default().to_string_lossy();
        let actual = match render(case) {
            Ok(text) => text,
            Err(why) => {
                failures.push(format!("ui/{name}: {why}"));
                continue;
            }
        };
        let expected_path = case.join("expected.stderr");
        if bless {
            let old = std::fs::read_to_string(&expected_path).ok();
            if old.as_deref() != Some(actual.as_str()) {
                std::fs::write(&expected_path, &actual).expect("write expected.stderr");
            }
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "ui/{name}: rendered diagnostics differ (BLESS=1 to accept)\n\
                 --- expected ({})\n{expected}\n--- actual\n{actual}",
                expected_path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The rendering is a pure function of the specs: two loads give the same text.
#[test]
fn ui_rendering_is_deterministic() {
    for case in cases() {
        assert_eq!(render(&case), render(&case), "{}", case.display());
    }
}

/// The case meant to show that errors are collected, not reported one at a time.
#[test]
fn many_errors_in_one_spec_are_reported_together() {
    let case = tests_dir().join("ui/ten_errors_at_once");
    let Err(BuildError::Specs(d)) = bulkhead_codegen::load(&case, &tests_dir()) else {
        panic!("ten_errors_at_once must fail with spec errors");
    };
    let messages: std::collections::BTreeSet<&str> =
        d.0.iter().map(|x| x.message.as_str()).collect();
    assert!(
        messages.len() >= 10,
        "{} distinct errors: {messages:#?}",
        messages.len()
    );
    assert!(
        d.0.iter()
            .all(|x| x.path == "ui/ten_errors_at_once/servers/many.yaml")
    );
}

/// Every diagnostic points at a real position inside its file.
#[test]
fn every_position_is_inside_its_file() {
    for case in cases() {
        let Err(BuildError::Specs(d)) = bulkhead_codegen::load(&case, &tests_dir()) else {
            continue;
        };
        for x in &d.0 {
            let lines = x.text.lines().count().max(1);
            assert!(x.span.line >= 1 && x.span.line <= lines, "{}", x.location());
            assert!(x.span.col >= 1, "{}", x.location());
            assert!(x.span.start <= x.text.len(), "{}", x.location());
            assert!(!x.label.is_empty(), "{} has no label", x.location());
            let mut first = x.message.chars();
            let capitalised = first.next().is_some_and(char::is_uppercase)
                && !first.next().is_some_and(char::is_uppercase); // acronyms like SQL are fine
            assert!(
                !x.message.ends_with('.') && !capitalised,
                "{}: message style: {}",
                x.location(),
                x.message
            );
        }
    }
}

/// A server that saves large results but cannot read a file back gets a warning (not an error).
#[test]
fn results_that_no_tool_can_read_back_are_warned_about() {
    use bulkhead_codegen::spec::SpecKind;
    let logs = "name: app_logs\nkind: logs\nsensitivity: internal\nsettings: { dir: logs }\noperations:\n  search:\n    action: search\n";
    let files = "name: workspace\nkind: files\nsensitivity: internal\noperations:\n  read:\n    action: read\n";
    let server = |extra: &str| {
        format!(
            "name: ops\ninstructions: Ops.\ntools:\n  search_logs:\n    description: Search logs.\n    permission: read\n    context: log_search\n    sensitivity: internal\n    uses: app_logs.search\n{extra}"
        )
    };
    let without = server("");
    let model = bulkhead_codegen::load_sources(vec![
        (SpecKind::Connector, "connectors/app_logs.yaml", logs),
        (SpecKind::Connector, "connectors/workspace.yaml", files),
        (SpecKind::Server, "servers/ops.yaml", &without),
    ])
    .expect("valid specs");
    assert_eq!(model.warnings.len(), 1);
    let w = model.warnings[0].render();
    assert!(
        w.starts_with("warning: server `ops` saves large results"),
        "{w}"
    );
    assert!(w.contains("servers/ops.yaml:3:1"), "{w}");
    let with = server(
        "  read_file:\n    description: Read a file.\n    permission: read\n    context: default\n    sensitivity: internal\n    uses: workspace.read\n",
    );
    let model = bulkhead_codegen::load_sources(vec![
        (SpecKind::Connector, "connectors/app_logs.yaml", logs),
        (SpecKind::Connector, "connectors/workspace.yaml", files),
        (SpecKind::Server, "servers/ops.yaml", &with),
    ])
    .expect("valid specs");
    assert!(model.warnings.is_empty());
}

/// A `postgres` connector, and the spec checks that know it: `::casts` are not placeholders,
/// and a secret tool over it (which could only run where no database is reachable) is warned
/// about at its `sensitivity`.
#[test]
fn postgres_specs_are_checked_and_secret_tools_over_them_warned_about() {
    use bulkhead_codegen::spec::SpecKind;
    let pg = "name: crm\nkind: postgres\nsensitivity: confidential\nsettings: { url: \"${CRM_URL}\" }\nsecrets: [CRM_URL]\noperations:\n  get:\n    params:\n      id: { type: integer, description: Id }\n    sql: SELECT id::text AS id, name FROM accounts WHERE id = :id\n";
    let files = "name: workspace\nkind: files\nsensitivity: internal\noperations:\n  read:\n    action: read\n";
    let server = |level: &str| {
        format!(
            "name: crm\ninstructions: CRM.\ntools:\n  get_account:\n    description: One account.\n    permission: read\n    context: sql_query\n    sensitivity: {level}\n    uses: crm.get\n  read_file:\n    description: Read a file.\n    permission: read\n    context: default\n    sensitivity: internal\n    uses: workspace.read\n"
        )
    };
    let load = |srv: &str| {
        bulkhead_codegen::load_sources(vec![
            (SpecKind::Connector, "connectors/crm.yaml", pg),
            (SpecKind::Connector, "connectors/workspace.yaml", files),
            (SpecKind::Server, "servers/crm.yaml", srv),
        ])
    };
    let model = load(&server("confidential")).expect("valid specs");
    assert!(
        model.warnings.is_empty(),
        "{:?}",
        model
            .warnings
            .iter()
            .map(|w| w.render())
            .collect::<Vec<_>>()
    );
    let model = load(&server("secret")).expect("valid specs");
    assert_eq!(model.warnings.len(), 1);
    let w = model.warnings[0].render();
    assert!(
        w.contains("tool `get_account` is secret, so it runs only on `none` instances"),
        "{w}"
    );
    assert!(w.contains("servers/crm.yaml:8:18"), "{w}");
    // A secret with a default is refused.
    let leaky = pg.replace("${CRM_URL}", "${CRM_URL:-postgres://u:pw@db/crm}");
    let err = bulkhead_codegen::load_sources(vec![
        (SpecKind::Connector, "connectors/crm.yaml", leaky.as_str()),
        (SpecKind::Connector, "connectors/workspace.yaml", files),
        (
            SpecKind::Server,
            "servers/crm.yaml",
            &server("confidential"),
        ),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("secret `CRM_URL` has a default value"),
        "{err}"
    );
}

#[test]
fn a_production_deployment_without_image_digests_is_warned_about() {
    use bulkhead_codegen::spec::SpecKind;
    let files = "name: workspace\nkind: files\nsensitivity: internal\noperations:\n  read:\n    action: read\n";
    let server = "name: ops\ninstructions: Ops.\ntools:\n  read_file:\n    description: Read a file.\n    permission: read\n    context: default\n    sensitivity: internal\n    uses: workspace.read\n";
    let load = |deployment: &str| {
        bulkhead_codegen::load_sources(vec![
            (SpecKind::Connector, "connectors/workspace.yaml", files),
            (SpecKind::Server, "servers/ops.yaml", server),
            (SpecKind::Deployment, "deployments/prod.yaml", deployment),
        ])
        .expect("valid specs")
    };
    let digest = "sha256:5b0f3a8e1c9d4f2a7b6e0c3d8a1f4e9b2c7d0a5f8e3b6c1d4a9f2e7b0c5d8a3f";
    let warned = load("name: prod\nenvironment: production\nservers:\n  ops:\n    port: 9000\n");
    let texts: Vec<String> = warned.warnings.iter().map(|w| w.render()).collect();
    assert_eq!(texts.len(), 2, "{texts:#?}");
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        texts[0].contains(&format!(
            "production deployment `prod` runs `bulkhead:{v}` without a digest"
        )),
        "{}",
        texts[0]
    );
    assert!(
        texts[1].contains(&format!("`bulkhead-egress-proxy:{v}`")),
        "{}",
        texts[1]
    );
    let pinned = load(&format!(
        "name: prod\nenvironment: production\nimage: {{ digest: \"{digest}\" }}\nproxy_image: {{ digest: \"{digest}\" }}\nservers:\n  ops:\n    port: 9000\n"
    ));
    assert!(pinned.warnings.is_empty());
    let development = load("name: dev\nservers:\n  ops:\n    port: 9000\n");
    assert!(development.warnings.is_empty());
}

#[test]
fn a_connect_tools_host_missing_from_the_deployments_egress_is_warned_about() {
    use bulkhead_codegen::spec::SpecKind;
    let hooks = "name: webhooks\nkind: http\nsensitivity: public\nsettings:\n  base_url: https://hooks.example.com\noperations:\n  notify:\n    method: POST\n    path: /notify\n    params:\n      message:\n        type: string\n        description: Text\n    body: [message]\n";
    let server = "name: ops\ninstructions: Ops.\ntools:\n  notify:\n    description: Post.\n    permission: connect\n    context: default\n    sensitivity: public\n    uses: webhooks.notify\n";
    let deployment =
        |egress: &str| format!("name: local\nservers:\n  ops:\n    port: 8000\n{egress}");
    let load = |d: &str| {
        bulkhead_codegen::load_sources(vec![
            (SpecKind::Connector, "connectors/webhooks.yaml", hooks),
            (SpecKind::Server, "servers/ops.yaml", server),
            (SpecKind::Deployment, "deployments/local.yaml", d),
        ])
        .expect("valid specs")
    };
    let reach = |m: &bulkhead_codegen::model::Model| -> Vec<String> {
        m.warnings
            .iter()
            .map(|w| w.render())
            .filter(|w| w.contains("does not list in `egress`"))
            .collect()
    };
    let model = load(&deployment(""));
    let w = reach(&model);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("`ops.notify` reaches `hooks.example.com:443` (connector `webhooks`), which deployment `local` does not list in `egress`")
            && w[0].contains("deployments/local.yaml:3:3"),
        "{}",
        w[0]
    );
    let model = load(&deployment("    egress: [hooks.example.com:443]\n"));
    assert!(reach(&model).is_empty(), "{:?}", reach(&model));
}

#[test]
fn a_connector_handed_a_key_the_config_reads_is_refused_where_it_is_named() {
    // The project's config.yaml verifies tokens with `${ORG_JWT_KEY}`; a launched upstream
    // given that variable could mint any user's token.
    let root = tempfile::tempdir().unwrap();
    let case = root.path().join("specs");
    for dir in ["connectors", "servers"] {
        std::fs::create_dir_all(case.join(dir)).unwrap();
    }
    let ui = tests_dir().join("ui/connector_given_server_secret");
    std::fs::copy(ui.join("servers/s.yaml"), case.join("servers/s.yaml")).unwrap();
    std::fs::copy(
        ui.join("connectors/clock.lock.json"),
        case.join("connectors/clock.lock.json"),
    )
    .unwrap();
    let connector = |env: &str| {
        format!(
            "name: clock\nkind: mcp\nsensitivity: public\nsettings:\n  command: [\"mcp-server-time\"]\n  env:\n    TZ: UTC\n{env}operations:\n  now:\n    tool: now\n"
        )
    };
    std::fs::write(
        root.path().join("config.yaml"),
        "auth:\n  keys:\n    - kid: org\n      alg: HS256\n      secret: ${ORG_JWT_KEY}\naudit:\n  signing_key: ${AUDIT_KEY_PATH:-/run/k}\n",
    )
    .unwrap();
    let write =
        |env: &str| std::fs::write(case.join("connectors/clock.yaml"), connector(env)).unwrap();
    write("    KEY: ${ORG_JWT_KEY}\n    AUDIT: ${AUDIT_KEY_PATH}\n");
    let Err(BuildError::Specs(d)) = bulkhead_codegen::load(&case, root.path()) else {
        panic!("a connector holding the server's key loaded");
    };
    let text = d.render();
    assert!(
        text.contains("connector `clock` is handed the server's own secret `ORG_JWT_KEY`")
            && text.contains("config.yaml /auth/keys/0/secret")
            && text.contains("connectors/clock.yaml:8:10"),
        "{text}"
    );
    assert!(
        text.contains("`AUDIT_KEY_PATH`") && text.contains("config.yaml /audit/signing_key"),
        "{text}"
    );
    // A variable of its own is fine.
    write("    KEY: ${CLOCK_KEY:-}\n");
    assert!(bulkhead_codegen::load(&case, root.path()).is_ok());
}
