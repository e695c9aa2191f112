//! Real identity (issue 35) against a real OpenID provider: `oidc-provider` (npm, certified) in
//! the small configured app of `tests/interop/oidc/`, users and consent scripted by
//! `tests/interop/oidc/browser.py`. The official MCP Python SDK's OAuth client signs in through
//! Bulkhead's authorization server, which sends the user on to that provider.

use crate::harness::target_dir;
use crate::python_sdk::venv_python;
use bulkhead::auth::Verifier;
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A running `provider.mjs`; killed on drop (and it exits when its stdin closes).
pub struct Provider {
    pub issuer: String,
    child: Child,
    _config: tempfile::NamedTempFile,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `oidc-provider` installed once under `target/oidc-provider` (the version `package.json`
/// pins); its `node_modules`.
fn node_modules() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/oidc/package.json");
        let dir = target_dir().join("oidc-provider");
        std::fs::create_dir_all(&dir).unwrap();
        let pinned = std::fs::read_to_string(&src).unwrap();
        let ready = std::fs::read_to_string(dir.join("package.json")).is_ok_and(|t| t == pinned)
            && dir.join("node_modules/oidc-provider/package.json").exists();
        if !ready {
            std::fs::write(dir.join("package.json"), &pinned).unwrap();
            let ok = Command::new("npm")
                .args(["install", "--silent", "--no-audit", "--no-fund"])
                .current_dir(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "could not install oidc-provider (needs Node.js 18+, npm and the npm registry)"
            );
        }
        dir.join("node_modules")
    })
    .clone()
}

/// Starts the provider with `config` (see the header of `provider.mjs`); waits (bounded) for its
/// ready line.
pub fn start_provider(config: Value) -> Provider {
    let modules = node_modules();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config.to_string()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/oidc/provider.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .arg("0")
        .arg(file.path())
        .arg(&modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the provider starts within 60 s");
    let ready: Value = serde_json::from_str(&line).expect("the ready line is JSON");
    Provider {
        issuer: ready["issuer"].as_str().unwrap().to_owned(),
        child,
        _config: file,
    }
}

/// The provider the tests sign in at: users alice and bob (their email also in access tokens),
/// access tokens for `urn:bulkhead` with audience `bulkhead-deployment`.
pub fn test_provider(clients: Value) -> Provider {
    start_provider(json!({
        "resource": "urn:bulkhead",
        "audience": "bulkhead-deployment",
        "resource_scopes": ["read", "write"],
        "signing_alg": "ES256",
        "access_token_claims": ["email"],
        "users": [
            {"id": "alice", "email": "alice@example.test", "name": "Alice"},
            {"id": "bob", "email": "bob@example.test", "name": "Bob"}
        ],
        "clients": clients,
    }))
}

/// A Bulkhead instance of `template` whose token service signs users in at `provider`
/// (registering itself there) and exchanges its tokens; its issuer is its own URL.
pub struct Bulkhead {
    pub base: String,
    pub url: String,
    _dir: tempfile::TempDir,
    stop: CancellationToken,
}

impl Drop for Bulkhead {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn start_bulkhead(provider: &Provider, mode: NetworkMode, ttl_secs: u64) -> Bulkhead {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let d = dir.path().display();
    let text = format!(
        "auth:\n  issuer: {base}\n  audience: bulkhead-test\n\
         token_service:\n  ttl_secs: {ttl_secs}\n  claims: [email]\n\
         \x20 login: {{ scope: openid email read }}\n\
         \x20 provider: {{ issuer: \"{}\", audience: bulkhead-deployment, oidc_discovery: true }}\n\
         http:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: true\n\
         state:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n",
        provider.issuer
    );
    let config = Config::parse(&text, "test", &|_| None).expect("test config");
    let rt = Arc::new(
        bulkhead::serve::runtime(&config, "template", mode)
            .await
            .expect("runtime"),
    );
    let tokens = bulkhead::sessions::TokenService::from_config(&config)
        .expect("token service")
        .map(Arc::new);
    let key = tokens.as_ref().unwrap().key().public_jwk().clone();
    let verifier = Verifier::with_session_key(&config.auth, &key).expect("verifier");
    let stop = CancellationToken::new();
    let app = bulkhead::serve::http::router_with_tokens(
        rt,
        verifier,
        &config.auth.issuer,
        &config.http,
        &base,
        stop.clone(),
        tokens,
    );
    tokio::spawn(bulkhead::serve::http::serve(listener, app, stop.clone()));
    Bulkhead {
        url: format!("{base}/mcp"),
        base,
        _dir: dir,
        stop,
    }
}

fn interop(script: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script)
}

/// The SDK's OAuth client completes the flow and calls tools; two conversations of one user are
/// two sessions with two ratchets; a refreshed token keeps its session and level; the user's
/// email reaches the session token, never a token of the provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_signs_in_through_a_real_provider_and_each_conversation_is_a_session() {
    let provider = tokio::task::spawn_blocking(|| test_provider(json!([])))
        .await
        .unwrap();
    let bulkhead = start_bulkhead(&provider, NetworkMode::Proxied, 3).await;
    let python = tokio::task::spawn_blocking(venv_python).await.unwrap();
    let out = tokio::process::Command::new(python)
        .arg(interop("oauth_client.py"))
        .arg(&bulkhead.url)
        .arg("alice")
        .arg("4")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "oauth client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the client prints JSON");
    let (first, second, refreshed) = (&seen["first"], &seen["second"], &seen["refreshed"]);
    for c in [first, second, refreshed] {
        assert_eq!(c["sub"], "alice", "{seen}");
        assert_eq!(
            c["iss"], bulkhead.base,
            "a session token of Bulkhead: {seen}"
        );
        assert_eq!(c["aud"], "bulkhead-test");
        assert_eq!(c["email"], "alice@example.test");
        assert_eq!(c["scope"], "read");
    }
    assert_ne!(first["session_id"], second["session_id"], "{seen}");
    assert_eq!(first["session_id"], refreshed["session_id"], "{seen}");
    assert_ne!(first["jti"], refreshed["jti"], "the SDK refreshed: {seen}");
    assert_eq!(seen["loaded"]["error"], false, "{seen}");
    assert_eq!(seen["loaded"]["level"], "confidential");
    assert_eq!(seen["second_read"]["level"], "internal", "another ratchet");
    assert_eq!(
        seen["first_read_after_refresh"]["level"], "confidential",
        "the refreshed token keeps its session's level"
    );
    assert_eq!(seen["client_id_is_sealed"], true);
}
