//! The CLI as a user runs it: `demo`, `token` (refused for production), `check`.

use std::process::Command;

fn bulkhead(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkhead"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run bulkhead")
}

#[test]
fn demo_walks_the_four_scenarios() {
    let out = bulkhead(&["demo"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expect in [
        "→ meeting at 10",
        "retryable error (the model may fix its arguments and try again); session level now: internal",
        "load_sensitive_dataset customers_2026\n    → answered by the proxied instance: ok; session level now: confidential",
        "search_records query=\"\"\n    → answered by the proxied instance: retryable error",
        "1,Acme renewal #100,ana",
        "connect tools stay blocked",
        "a client that never switched calls read_file on the full instance\n    → fatal error",
    ] {
        assert!(text.contains(expect), "missing {expect:?} in:\n{text}");
    }
    if rustix::process::geteuid().is_root() {
        // With namespaces the demo also shows the egress proxy refusing the proxied instance.
        assert!(
            text.contains("bob, public session)\n    → fatal error")
                && text.contains("the egress proxy refused"),
            "{text}"
        );
    }
}

#[test]
fn token_is_refused_for_production_and_verifies_otherwise() {
    let out = bulkhead(
        &["token", "--user", "zoe"],
        &[("BULKHEAD_ENV", "production")],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("environment: production"));
    let out = bulkhead(&["token", "--user", "zoe", "--session", "s7"], &[]);
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap();
    let config = bulkhead::config::Config::load(None).unwrap();
    let v = bulkhead::auth::Verifier::new(&config.auth)
        .unwrap()
        .verify(token.trim())
        .unwrap();
    assert_eq!((v.identity.user(), v.identity.session()), ("zoe", "s7"));
}

#[test]
fn check_reports_the_example_specs() {
    let out = bulkhead(&["check"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("config ok: "), "{text}");
    assert!(text.contains("specs ok: 2 server(s), 10 tool(s)"), "{text}");
}

/// `check` covers config.yaml: a misspelt key fails it with file:line:col and a help line.
#[test]
fn check_reports_a_broken_config_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(root.join("config.yaml")).unwrap();
    let line = config
        .lines()
        .position(|l| l.starts_with("  stateful:"))
        .unwrap()
        + 1;
    std::fs::write(
        dir.path().join("config.yaml"),
        config.replace("  stateful:", "  statefull:"),
    )
    .unwrap();
    let copy = Command::new("cp")
        .arg("-r")
        .arg(root.join("specs"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copy.success());
    let out = bulkhead(&["check", "--root", dir.path().to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("error: unknown key `statefull` in `http`"),
        "{err}"
    );
    assert!(err.contains(&format!("config.yaml:{line}:3")), "{err}");
    assert!(err.contains("help: did you mean `stateful`?"), "{err}");
}

#[test]
fn check_and_serve_refuse_connector_data_inside_the_workspaces() {
    // A logs connector over the workspaces would read every user's files, and the more isolated
    // modes' layers, from a networked instance.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let copy = Command::new("cp")
        .arg("-r")
        .arg(root.join("specs"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copy.success());
    std::fs::copy(root.join("config.yaml"), dir.path().join("config.yaml")).unwrap();
    let spec = dir.path().join("specs/connectors/app_logs.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("data/logs"), "{text}");
    std::fs::write(
        &spec,
        text.replace("data/logs", ".bulkhead/workspaces/template.none"),
    )
    .unwrap();
    let out = bulkhead(&["check", "--root", dir.path().to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("connector `app_logs`'s dir") && err.contains("overlaps state.workspaces"),
        "{err}"
    );
    // The running instance refuses to start with it too.
    let ws = dir.path().join("ws");
    let out = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .args(["serve", "template", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env("BULKHEAD_STATE_DIR", dir.path().join("state"))
        .env("BULKHEAD_WORKSPACES", &ws)
        .env("APP_LOG_DIR", ws.join("template.none"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("overlaps state.workspaces"), "{err}");
}
