//! A real server on 127.0.0.1 (random port) with real tokens, and real rmcp clients.

use bulkhead::auth::Verifier;
use bulkhead::auth::mint::{MintClaims, mint_hs256};
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The development secret of the embedded config.
pub const SECRET: &str = "integration-test-secret-0123456789abcdef";

/// A running instance and what is needed to talk to it.
pub struct Instance {
    pub url: String,
    pub base: String,
    pub _dir: Arc<tempfile::TempDir>,
    stop: CancellationToken,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A config whose state lives in `dir`.
pub fn config(dir: &std::path::Path, stateful: bool) -> Config {
    let d = dir.display().to_string();
    let text = format!(
        "auth:\n  issuer: test-issuer\n  audience: bulkhead-test\n  keys:\n    - {{ kid: dev, alg: HS256, secret: {SECRET} }}\nhttp:\n  allowed_hosts: [localhost, 127.0.0.1]\n  allowed_origins: [\"http://agent.example:3000\"]\n  stateful: {stateful}\nstate:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n"
    );
    Config::parse(&text, "test", &|_| None).expect("test config")
}

/// Starts `template` in `mode` with its state in `dir` (shared dirs = instances of one server).
pub async fn start(dir: Arc<tempfile::TempDir>, mode: NetworkMode, stateful: bool) -> Instance {
    let config = config(dir.path(), stateful);
    start_with(config, dir, mode).await
}

/// Starts `template` in `mode` with `config` (its state folders should lie in `dir`).
pub async fn start_with(
    config: Config,
    dir: Arc<tempfile::TempDir>,
    mode: NetworkMode,
) -> Instance {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    start_on(listener, config, dir, mode).await
}

/// [`start_with`] on a listener bound already (a configuration that names the instance's own
/// URL, such as its issuer, is written after binding). The token service is served when the
/// configuration has one.
pub async fn start_on(
    listener: tokio::net::TcpListener,
    config: Config,
    dir: Arc<tempfile::TempDir>,
    mode: NetworkMode,
) -> Instance {
    let rt = Arc::new(
        bulkhead::serve::runtime(
            &bulkhead_example::servers::PROJECT,
            &config,
            "template",
            mode,
        )
        .await
        .expect("runtime"),
    );
    let addr = listener.local_addr().expect("addr");
    let base = format!("http://{addr}");
    let stop = CancellationToken::new();
    let tokens = bulkhead::sessions::TokenService::from_config(&config)
        .expect("token service")
        .map(Arc::new);
    let verifier = match &tokens {
        Some(t) => Verifier::with_session_key(&config.auth, t.key().public_jwk()),
        None => Verifier::new(&config.auth),
    }
    .expect("verifier");
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
    Instance {
        url: format!("{base}/mcp"),
        base,
        _dir: dir,
        stop,
    }
}

/// A JSON-RPC `ping` to `url` with `token` as the bearer: what the auth layer answers.
pub async fn ping_with(url: &str, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect("the instance answers")
}

/// A token for `user`/`session` with the test key and audience.
pub fn token(user: &str, session: &str) -> String {
    token_for(user, session, "bulkhead-test", 600)
}

/// A token with a chosen audience and lifetime.
pub fn token_for(user: &str, session: &str, aud: &str, ttl: u64) -> String {
    let claims = MintClaims {
        sub: user.into(),
        session_id: session.into(),
        iss: "test-issuer".into(),
        aud: aud.into(),
        ttl_secs: ttl,
    };
    mint_hs256(SECRET.as_bytes(), &claims).expect("mint")
}

/// An rmcp client connected with `token`.
pub async fn client(url: &str, token: &str) -> RunningService<rmcp::RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string()),
    );
    ().serve(transport).await.expect("client connects")
}

/// Calls a tool; returns (is_error, text, _meta sensitivity).
pub async fn call(
    c: &RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, String, String) {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(m) = args {
        params = params.with_arguments(m);
    }
    let r: CallToolResult = c.call_tool(params).await.expect("call_tool transport");
    let text = r
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("");
    let level = r
        .meta
        .as_ref()
        .and_then(|m| m.0.get("bulkhead/sensitivity"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    (r.is_error.unwrap_or(false), text, level)
}

/// A correctly signed token that expired two minutes ago (beyond the 30 s leeway).
pub fn expired_token(user: &str, session: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({"sub": user, "session_id": session, "iss": "test-issuer", "aud": "bulkhead-test", "iat": now - 600, "exp": now - 120});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

/// The build's target folder (tools the tests install live under it).
pub fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// A virtualenv `target/<name>` with `packages` (pinned `pip` requirements) installed from PyPI
/// once: a marker names what was installed, so a changed pin installs again. Installs are
/// serialised (two tests filling one folder break each other).
pub fn pip_venv(name: &str, packages: &[&str]) -> std::path::PathBuf {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
    let venv = target_dir().join(name);
    let marker = venv.join(format!(".installed-{}", packages.join("+")));
    if !marker.exists() {
        let ok = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && std::process::Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet"])
                .args(packages)
                .status()
                .is_ok_and(|s| s.success());
        assert!(
            ok,
            "could not install {} into {} (needs python3-venv and PyPI)",
            packages.join(", "),
            venv.display()
        );
        std::fs::write(&marker, "").unwrap();
    }
    venv
}
