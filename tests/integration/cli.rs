//! The CLI as a user runs it: `demo`, `token` (refused for production), `check`.

use std::path::Path;
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
        "(the provider's token exchanged at http://",
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
    assert!(text.contains("specs ok: 3 server(s), 19 tool(s)"), "{text}");
}

/// `check --config FILE` checks FILE, not the project's config.yaml: a broken FILE fails it,
/// naming FILE, and a FILE that does not exist is an error, not the embedded defaults.
#[test]
fn check_checks_the_config_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("other.yaml");
    std::fs::write(&broken, "http:\n  statefull: true\n").unwrap();
    let out = bulkhead(&["--config", broken.to_str().unwrap(), "check"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("other.yaml:2:3"), "{err}");
    let missing = dir.path().join("missing.yaml");
    let out = bulkhead(&["--config", missing.to_str().unwrap(), "check"], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing.yaml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let good = dir.path().join("good.yaml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml"),
        &good,
    )
    .unwrap();
    let out = bulkhead(&["--config", good.to_str().unwrap(), "check"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("config ok: ") && text.contains("good.yaml"),
        "{text}"
    );
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

/// The README's first call, as pasted: `up --unisolated` serves every instance without root, and
/// the Python block of "First call" (read from README.md) writes, reads, and reaches a
/// confidential tool on the proxied instance with a token from `bulkhead token`.
#[test]
fn the_readme_first_call_works_as_pasted() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme
        .find("### First call")
        .expect("README has a First call section")..];
    let start = section.find("```python\n").expect("a python block") + "```python\n".len();
    let script = &section[start..start + section[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("first_call.py"), script).unwrap();
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml");
    // Three consecutive free ports (the compose ports may be taken by other tests).
    let port = (0..200)
        .map(|i| 21000 + (std::process::id() % 2000) as u16 * 3 + i * 7)
        .find(|p| (0..3).all(|k| std::net::TcpListener::bind(("127.0.0.1", p + k)).is_ok()))
        .expect("three free ports");
    let state = dir.path().join("state");
    let ws = dir.path().join("ws");
    let env = [
        ("BULKHEAD_STATE_DIR", state.to_str().unwrap()),
        ("BULKHEAD_WORKSPACES", ws.to_str().unwrap()),
    ];
    let mut up = Command::new(env!("CARGO_BIN_EXE_bulkhead"));
    up.args([
        "--config",
        config,
        "up",
        "--unisolated",
        "--port",
        &port.to_string(),
    ])
    .current_dir(dir.path())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null());
    for (k, v) in env {
        up.env(k, v);
    }
    let mut up = up.spawn().unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = self.0.wait();
        }
    }
    let stdout = up.stdout.take().unwrap();
    let up = Kill(up);
    // Up when it prints the client entries (it waits for every instance's /healthz first).
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let ready = lines
        .by_ref()
        .take(100)
        .map_while(Result::ok)
        .any(|l| l.contains("url_isolated:"));
    assert!(ready, "up --unisolated did not come up");
    // Twice in a row, as a newcomer would: each `token` is a new conversation (a session's level
    // only rises, and the first run's ends confidential). The third run takes the README's next
    // step: the development token exchanged at the full instance's `POST /token` for a session
    // token, and the same script with that.
    for run in 0..3 {
        let token = Command::new(env!("CARGO_BIN_EXE_bulkhead"))
            .args(["--config", config, "token"])
            .output()
            .unwrap();
        assert!(token.status.success());
        let mut token = String::from_utf8(token.stdout).unwrap();
        let python = super::python_sdk::venv_python();
        if run == 2 {
            let exchange = "import json, sys, urllib.parse, urllib.request\n\
                form = urllib.parse.urlencode({'grant_type': 'urn:ietf:params:oauth:grant-type:token-exchange', \
                'subject_token_type': 'urn:ietf:params:oauth:token-type:access_token', 'subject_token': sys.argv[2]}).encode()\n\
                print(json.load(urllib.request.urlopen(sys.argv[1], data=form, timeout=30))['access_token'])\n";
            let out = Command::new(&python)
                .args(["-c", exchange])
                .arg(format!("http://127.0.0.1:{port}/token"))
                .arg(token.trim())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "exchange: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            token = String::from_utf8(out.stdout).unwrap();
        }
        let out = Command::new(python)
            .arg("first_call.py")
            .current_dir(dir.path())
            .env("TOKEN", token.trim())
            .env("BULKHEAD_URL", format!("http://127.0.0.1:{port}/mcp"))
            .env(
                "BULKHEAD_URL_PROXIED",
                format!("http://127.0.0.1:{}/mcp", port + 1),
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "run {run}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("read_file: hi"), "run {run}: {text}");
        assert!(
            text.contains("search_records: id,title,owner"),
            "run {run}: {text}"
        );
    }
    drop(up);
}

/// With a typo in a spec the server does not build (its build script stops), and the README's
/// command for that case prints the diagnostic, once, at its file:line:col.
#[test]
fn the_spec_check_runs_while_a_spec_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for sub in ["servers", "connectors", "deployments"] {
        std::fs::create_dir_all(dir.path().join("specs").join(sub)).unwrap();
        for e in std::fs::read_dir(root.join("specs").join(sub))
            .unwrap()
            .flatten()
        {
            std::fs::copy(
                e.path(),
                dir.path().join("specs").join(sub).join(e.file_name()),
            )
            .unwrap();
        }
    }
    let spec = dir.path().join("specs/servers/template.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text.replacen("permission: read", "permision: read", 1),
    )
    .unwrap();
    let check = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debug/bulkhead-check");
    let check = if check.exists() {
        check
    } else {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(|t| Path::new(&t).join("debug/bulkhead-check"))
            .unwrap()
    };
    let out = Command::new(check).arg(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("specs/servers/template.yaml:"), "{err}");
    assert_eq!(err.matches("unknown key `permision`").count(), 1, "{err}");
}

/// A refused token is answered 401 and said in the server's log at its default level (warn), so
/// an operator whose clients all get 401 sees why without turning on debugging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_logged_at_the_default_level() {
    let mut d = crate::procs::Deployment::new(crate::procs::Store::Sqlite, "bad-token-log").await;
    d.unset_env("BULKHEAD_LOG");
    let proc = d.start("full", None);
    let resp = reqwest::Client::new()
        .post(&proc.url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .bearer_auth("not-a-token")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&proc.log).unwrap_or_default();
        if log.contains("token refused (401)") {
            assert!(
                !log.contains("not-a-token"),
                "the log holds the token: {log}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no log line: {log}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
