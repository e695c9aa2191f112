//! Real identity (issue 35) against a real OpenID provider: `oidc-provider` (npm, certified) in
//! the small configured app of `tests/interop/oidc/`, users and consent scripted by
//! `tests/interop/oidc/browser.py`. The official MCP Python SDK's OAuth client signs in through
//! Bulkhead's authorization server, which sends the user on to that provider.

use crate::harness::target_dir;
use crate::python_sdk::venv_python;
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

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
    start_provider(test_provider_config(clients))
}

/// Bulkhead's client at the provider's introspection endpoint, and its secret.
const INTROSPECTOR: (&str, &str) = ("bulkhead-introspect", "introspect-secret-0123456789");

/// [`test_provider`] as `oidc-provider` ships: opaque access tokens (no resource indicator is
/// sent, none is the default), the resource scopes granted as plain scopes; Bulkhead's
/// introspection client ([`INTROSPECTOR`]) is registered beside `clients`.
pub fn opaque_provider(clients: Value) -> Provider {
    let mut clients = clients.as_array().cloned().unwrap_or_default();
    clients.push(json!({
        "client_id": INTROSPECTOR.0, "client_secret": INTROSPECTOR.1,
        "grant_types": ["client_credentials"]
    }));
    let mut config = test_provider_config(Value::Array(clients));
    config["opaque"] = json!(true);
    start_provider(config)
}

/// `token_service` lines that introspect opaque tokens of `clients` as [`INTROSPECTOR`] (its
/// secret written to a file under `dir`), answers reused for at most a second.
fn introspection_lines(dir: &std::path::Path, clients: &[&str]) -> String {
    let secret = dir.join("introspect-secret");
    std::fs::write(&secret, INTROSPECTOR.1).unwrap();
    format!(
        "  introspection: {{ client_id: {}, client_secret_file: {}, clients: {clients:?}, cache_secs: 1 }}\n",
        INTROSPECTOR.0,
        secret.display()
    )
}

fn test_provider_config(clients: Value) -> Value {
    json!({
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
    })
}

/// A Bulkhead instance of `template` whose token service signs users in at `provider`
/// (registering itself there) and exchanges its tokens; its issuer is its own URL.
pub async fn start_bulkhead(
    provider: &Provider,
    mode: NetworkMode,
    ttl_secs: u64,
) -> crate::harness::Instance {
    start_bulkhead_with(provider, mode, ttl_secs, "").await
}

/// [`start_bulkhead`] with `token_service` lines added (two-space indented, e.g. its key).
pub async fn start_bulkhead_with(
    provider: &Provider,
    mode: NetworkMode,
    ttl_secs: u64,
    token_service: &str,
) -> crate::harness::Instance {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let d = dir.path().display();
    let text = format!(
        "auth:\n  issuer: {base}\n  audience: bulkhead-test\n  leeway_secs: 0\n\
         token_service:\n  ttl_secs: {ttl_secs}\n  claims: [email]\n{token_service}\
         \x20 login: {{ scope: openid email read }}\n\
         \x20 provider: {{ issuer: \"{}\", audience: bulkhead-deployment, oidc_discovery: true }}\n\
         http:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: true\n\
         state:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n",
        provider.issuer
    );
    let config = Config::parse(&text, "test", &|_| None).expect("test config");
    crate::harness::start_on(listener, config, dir, mode).await
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
    python_sdk_signs_in(false).await;
}

/// The same where the provider issues opaque access tokens (`oidc-provider` at its defaults):
/// Bulkhead, the provider's relying party, reads who signed in from the verified ID token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_signs_in_where_the_provider_issues_opaque_tokens() {
    python_sdk_signs_in(true).await;
}

async fn python_sdk_signs_in(opaque: bool) {
    let provider = tokio::task::spawn_blocking(move || {
        if opaque {
            opaque_provider(json!([]))
        } else {
            test_provider(json!([]))
        }
    })
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
        // What the provider granted: resource scopes on its JWTs, every granted scope on an
        // opaque token (its token endpoint's `scope`).
        let granted = if opaque { "openid email read" } else { "read" };
        assert_eq!(c["scope"], granted);
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

/// Runs `browser.follow(url, login, stop)` (stdlib Python) and returns the URL it stopped at.
async fn follow(url: &str, login: &str, stop: &str) -> String {
    let out = tokio::process::Command::new("python3")
        .arg(interop("oidc/browser.py"))
        .args(["follow", url, login, stop])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "browser: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn query(url: &str) -> std::collections::HashMap<String, String> {
    reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn pkce() -> (String, String) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let verifier = format!("{:0>64}", rand::random::<u64>());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

const CB: &str = "http://127.0.0.1:9/cb";

/// `text` with its `at`-th character changed (a base64url character to another).
fn flip(text: &str, at: usize) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

/// The authorization server refuses what an attacker would try: a redirect URI off loopback at
/// registration, a forged client, an unregistered redirect URI, a missing PKCE challenge, a
/// changed sign-in state, a code replayed or redeemed with another verifier or by another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_server_refuses_forged_replayed_and_misdirected_requests() {
    let provider = tokio::task::spawn_blocking(|| test_provider(json!([])))
        .await
        .unwrap();
    let bh = start_bulkhead(&provider, NetworkMode::Full, 600).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let register = |uris: Value| {
        let http = http.clone();
        let url = format!("{}/register", bh.base);
        async move {
            let r = http
                .post(url)
                .json(&json!({"redirect_uris": uris, "token_endpoint_auth_method": "none"}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    // Loopback (any port) or a listed https origin only: nothing asks the user to consent to
    // each client, so an open https registration would receive codes of whoever follows a link.
    for bad in [
        "http://evil.test/cb",
        "https://evil.test/cb",
        "ftp://127.0.0.1/cb",
        "http://127.0.0.1/cb#frag",
    ] {
        let (status, body) = register(json!([bad])).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_redirect_uri")),
            "{bad}"
        );
    }
    let (status, client) = register(json!([CB])).await;
    assert_eq!(status, 201, "{client}");
    let client_id = client["client_id"].as_str().unwrap().to_owned();
    let (_, other) = register(json!(["http://127.0.0.1:9/other"])).await;
    let other_id = other["client_id"].as_str().unwrap().to_owned();
    let other = other_id.clone();

    let authorize = |client: &str, redirect: &str, challenge: Option<&str>| {
        let mut url = reqwest::Url::parse(&format!("{}/authorize", bh.base)).unwrap();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", client)
            .append_pair("redirect_uri", redirect)
            .append_pair("state", "st-1");
        if let Some(c) = challenge {
            url.query_pairs_mut()
                .append_pair("code_challenge", c)
                .append_pair("code_challenge_method", "S256");
        }
        url.to_string()
    };
    let status = |url: String| {
        let http = http.clone();
        async move {
            let r = http.get(url).send().await.unwrap();
            let location = r
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_owned());
            (r.status().as_u16(), location)
        }
    };
    let (_, challenge) = pkce();
    // A forged client id and an unregistered redirect URI get a page, never a redirect.
    let forged = flip(&client_id, 30);
    assert_eq!(
        status(authorize(&forged, CB, Some(&challenge))).await,
        (400, None)
    );
    assert_eq!(
        status(authorize(
            &client_id,
            "http://127.0.0.1:9/evil",
            Some(&challenge)
        ))
        .await,
        (400, None)
    );
    // No PKCE: the error goes to the registered redirect URI, with the client's state.
    let (code, location) = status(authorize(&client_id, CB, None)).await;
    let location = location.unwrap();
    assert_eq!(code, 302);
    assert!(location.starts_with(CB), "{location}");
    assert_eq!(query(&location)["error"], "invalid_request");
    assert_eq!(query(&location)["state"], "st-1");

    // A complete sign-in as bob.
    let (verifier, challenge) = pkce();
    let to_provider = status(authorize(&client_id, CB, Some(&challenge)))
        .await
        .1
        .unwrap();
    assert!(to_provider.starts_with(&provider.issuer), "{to_provider}");
    // A changed sign-in state is refused at the callback.
    let mut tampered = reqwest::Url::parse(&format!("{}/oauth/callback", bh.base)).unwrap();
    let sealed = query(&to_provider)["state"].clone();
    let flipped = flip(&sealed, sealed.len() / 2);
    tampered
        .query_pairs_mut()
        .append_pair("code", "x")
        .append_pair("state", &flipped)
        .append_pair("iss", &provider.issuer);
    assert_eq!(status(tampered.to_string()).await, (400, None));
    // RFC 9207: an answer naming another issuer (a mix-up) is refused, its code never used.
    let mut mixed = reqwest::Url::parse(&format!("{}/oauth/callback", bh.base)).unwrap();
    mixed
        .query_pairs_mut()
        .append_pair("code", "x")
        .append_pair("state", &sealed)
        .append_pair("iss", "https://attacker.test");
    assert_eq!(status(mixed.to_string()).await, (400, None));
    // A sign-in started elsewhere (here: the attacker's request above, whose provider link a
    // victim is sent to) is refused at the callback: the browser that finishes a sign-in must be
    // the one that started it.
    let phished = tokio::process::Command::new("python3")
        .arg(interop("oidc/browser.py"))
        .args(["follow", &to_provider, "bob", CB])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&phished.stderr);
    assert!(
        !phished.status.success() && said.contains("started in another browser"),
        "{said}"
    );
    let back = follow(&authorize(&client_id, CB, Some(&challenge)), "bob", CB).await;
    let q = query(&back);
    assert_eq!(q["state"], "st-1");
    assert_eq!(q["iss"], bh.base, "RFC 9207: the answer names Bulkhead");
    let code = q["code"].clone();
    let redeem = |code: String, verifier: String, client: String| {
        let http = http.clone();
        let url = format!("{}/token", bh.base);
        async move {
            let r = http
                .post(url)
                .form(&[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("redirect_uri", CB),
                    ("client_id", &client),
                    ("code_verifier", &verifier),
                ])
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (wrong_verifier, _) = pkce();
    let (s, body) = redeem(code.clone(), wrong_verifier, client_id.clone()).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    let (s, body) = redeem(code.clone(), verifier.clone(), other_id).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    // RFC 6749 §4.1.3: the client_id and redirect_uri of the authorization request are required.
    for missing in ["client_id", "redirect_uri"] {
        let form: Vec<(&str, &str)> = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", CB),
            ("client_id", client_id.as_str()),
            ("code_verifier", verifier.as_str()),
        ]
        .into_iter()
        .filter(|(k, _)| *k != missing)
        .collect();
        let r = http
            .post(format!("{}/token", bh.base))
            .form(&form)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_request")),
            "without {missing}: {body}"
        );
    }
    let (s, body) = redeem(code.clone(), verifier.clone(), client_id.clone()).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    let first_refresh = body["refresh_token"].as_str().unwrap().to_owned();
    let (s, body) = redeem(code, verifier, client_id.clone()).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "replay: {body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("used already")
    );

    // RFC 9700 §4.14.2: the refresh token is bound to the client it was issued to ...
    let refresh = |token: String, client: Option<String>| {
        let http = http.clone();
        let url = format!("{}/token", bh.base);
        async move {
            let mut form = vec![
                ("grant_type", "refresh_token".to_owned()),
                ("refresh_token", token),
            ];
            if let Some(c) = client {
                form.push(("client_id", c));
            }
            let r = http.post(url).form(&form).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    for stranger in [None, Some(other.clone())] {
        let (s, body) = refresh(first_refresh.clone(), stranger.clone()).await;
        assert_eq!(
            (s, body["error"].as_str()),
            (400, Some("invalid_grant")),
            "refreshed by {stranger:?}: {body}"
        );
        assert!(
            body["error_description"]
                .as_str()
                .unwrap()
                .contains("another client"),
            "{body}"
        );
    }
    // ... rotates on use ...
    let (s, rotated) = refresh(first_refresh.clone(), Some(client_id.clone())).await;
    assert_eq!(s, 200, "{rotated}");
    let second_refresh = rotated["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(second_refresh, first_refresh);
    // ... and a reuse of the old one (a thief's or the owner's, which cannot be told) ends the
    // family: the reused token and the one its rightful holder kept are both refused.
    let (s, body) = refresh(first_refresh, Some(client_id.clone())).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("used already"),
        "{body}"
    );
    let (s, body) = refresh(second_refresh, Some(client_id)).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("revoked"),
        "{body}"
    );
}

/// Two deployments sharing one signing key (and so able to open each other's sealed codes) but
/// not a store: a code issued by one is refused by the other, then redeemed where it was issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_redeemed_only_at_the_deployment_that_issued_it() {
    let provider = tokio::task::spawn_blocking(|| test_provider(json!([])))
        .await
        .unwrap();
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("session.pem");
    let made = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let with_key = format!("  signing_key_file: {}\n", key.display());
    let a = start_bulkhead_with(&provider, NetworkMode::Full, 600, &with_key).await;
    let b = start_bulkhead_with(&provider, NetworkMode::Full, 600, &with_key).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let client: Value = http
        .post(format!("{}/register", a.base))
        .json(&json!({"redirect_uris": [CB], "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = client["client_id"].as_str().unwrap().to_owned();
    let (verifier, challenge) = pkce();
    let mut url = reqwest::Url::parse(&format!("{}/authorize", a.base)).unwrap();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client_id)
        .append_pair("redirect_uri", CB)
        .append_pair("state", "st-2")
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let back = follow(url.as_str(), "bob", CB).await;
    let code = query(&back)["code"].clone();
    let redeem = |base: String| {
        let http = http.clone();
        let (code, client_id, verifier) = (code.clone(), client_id.clone(), verifier.clone());
        async move {
            let r = http
                .post(format!("{base}/token"))
                .form(&[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("redirect_uri", CB),
                    ("client_id", &client_id),
                    ("code_verifier", &verifier),
                ])
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (s, body) = redeem(b.base.clone()).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("issued by another deployment"),
        "{body}"
    );
    let (s, body) = redeem(a.base.clone()).await;
    assert_eq!(s, 200, "{body}");
}

/// A provider's token used directly (no exchange) is refused with a 401 that leads to the
/// exchange; exchanged through the token endpoint, it becomes a session token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_access_token_is_refused_directly_and_accepted_exchanged() {
    let provider = tokio::task::spawn_blocking(|| {
        test_provider(json!([{
            "client_id": "agent-host", "client_secret": "agent-host-secret-0123456789",
            "grant_types": ["client_credentials"]
        }]))
    })
    .await
    .unwrap();
    let bh = start_bulkhead(&provider, NetworkMode::Full, 600).await;
    let http = reqwest::Client::new();
    // A real token of the provider: the agent host's own (client credentials, sub = client id).
    let meta: Value = http
        .get(format!(
            "{}/.well-known/openid-configuration",
            provider.issuer
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let got: Value = http
        .post(meta["token_endpoint"].as_str().unwrap())
        .basic_auth("agent-host", Some("agent-host-secret-0123456789"))
        .form(&[("grant_type", "client_credentials"), ("scope", "read")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let provider_token = got["access_token"]
        .as_str()
        .expect("a provider token")
        .to_owned();
    let resp = crate::harness::ping_with(&bh.url, &provider_token).await;
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains(&format!("{}/token", bh.base)),
        "{challenge}"
    );
    let r: Value = http
        .post(format!("{}/token", bh.base))
        .form(&[
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("subject_token", &provider_token),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = r["access_token"].as_str().unwrap_or_else(|| panic!("{r}"));
    let c = crate::harness::client(&bh.url, session).await;
    let (err, text, _) =
        crate::harness::call(&c, "read_file", json!({"path": "/workspace/none.txt"})).await;
    assert!(err && text.contains("no such file"), "{text}");
    let _ = c.cancel().await;
}

/// `bulkhead connect template` reaching `bh`, without `BULKHEAD_TOKEN`, signing in at
/// `provider` as `login` (the `token_service.login` section) says; stderr read line by line.
struct Connect {
    child: tokio::process::Child,
    stderr: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    _dir: tempfile::TempDir,
}

impl Connect {
    fn start(provider: &Provider, bh: &crate::harness::Instance, login: &str) -> Connect {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "auth: {{ issuer: {base}, audience: bulkhead-test, keys: [] }}\n\
                 token_service:\n  login: {login}\n\
                 \x20 provider: {{ issuer: \"{iss}\", audience: bulkhead-deployment, oidc_discovery: true }}\n\
                 mcp_servers:\n  template: {{ url: \"{url}\" }}\n\
                 state: {{ dir: {d}/state, workspaces: {d}/ws }}\n",
                base = bh.base,
                iss = provider.issuer,
                url = bh.url,
                d = dir.path().display()
            ),
        )
        .unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bulkhead"))
            .arg("--config")
            .arg(&config)
            .args(["connect", "template"])
            .env_remove("BULKHEAD_TOKEN")
            .env_remove("BULKHEAD_TOKEN_FILE")
            .env("BULKHEAD_NO_BROWSER", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        use tokio::io::AsyncBufReadExt as _;
        let stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        Connect {
            child,
            stderr,
            _dir: dir,
        }
    }

    /// The next stderr line holding `needle`, waited for at most 60 s.
    async fn line_with(&mut self, needle: &str) -> String {
        let stderr = &mut self.stderr;
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            while let Some(line) = stderr.next_line().await.unwrap() {
                if line.contains(needle) {
                    return line;
                }
            }
            panic!("bulkhead connect ended before saying {needle:?}");
        })
        .await
        .unwrap_or_else(|_| panic!("bulkhead connect did not say {needle:?} within 60 s"))
    }

    /// Once the session is exchanged at `bh`'s token endpoint, the MCP client of the bridge.
    async fn bridge(
        mut self,
        bh: &crate::harness::Instance,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        use rmcp::ServiceExt as _;
        let session = self.line_with("bulkhead: session ").await;
        assert!(session.contains(&format!("{}/token", bh.base)), "{session}");
        let Connect {
            mut child,
            mut stderr,
            _dir: dir,
        } = self;
        tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let c = ().serve(io).await.expect("bulkhead connect serves stdio");
        // The process ends when its stdin closes (the client's cancel), or is killed with the
        // test's runtime; its folder goes with it.
        tokio::spawn(async move {
            let _ = child.wait().await;
            drop(dir);
        });
        c
    }
}

/// A `write_file` call through the bridge that succeeds within 60 s.
async fn write(c: &rmcp::service::RunningService<rmcp::RoleClient, ()>, path: &str) {
    let mut p = rmcp::model::CallToolRequestParams::new("write_file");
    p.arguments = json!({"path": path, "content": "x"}).as_object().cloned();
    let r = tokio::time::timeout(std::time::Duration::from_secs(60), c.call_tool(p))
        .await
        .expect("an answer within 60 s")
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
}

/// `bulkhead connect` without `BULKHEAD_TOKEN` signs the user in at the provider (the device
/// grant, completed here by the scripted user), exchanges for a session token of a fresh session
/// and bridges it; the token is refreshed while the bridge runs and calls keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_connect_signs_in_with_the_device_grant_and_bridges_a_session() {
    connect_signs_in_with_the_device_grant(false).await;
}

/// The same with opaque provider tokens: the exchange introspects them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_connect_signs_in_with_the_device_grant_where_tokens_are_opaque() {
    connect_signs_in_with_the_device_grant(true).await;
}

async fn connect_signs_in_with_the_device_grant(opaque: bool) {
    let clients = json!([{
        "client_id": "bulkhead-connect", "token_endpoint_auth_method": "none",
        "grant_types": ["urn:ietf:params:oauth:grant-type:device_code"]
    }]);
    let provider = tokio::task::spawn_blocking(move || {
        if opaque {
            opaque_provider(clients)
        } else {
            test_provider(clients)
        }
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lines = if opaque {
        introspection_lines(dir.path(), &["bulkhead-connect"])
    } else {
        String::new()
    };
    let bh = start_bulkhead_with(&provider, NetworkMode::Full, 4, &lines).await;
    let mut connect = Connect::start(
        &provider,
        &bh,
        "{ device_client_id: bulkhead-connect, scope: openid email read }",
    );
    // The prompt: "open URI and enter the code CODE".
    let prompt = connect.line_with("enter the code").await;
    let words: Vec<&str> = prompt.split_whitespace().collect();
    let uri = words[words.iter().position(|w| *w == "open").unwrap() + 1].to_owned();
    let code = words.last().unwrap().to_string();
    let out = tokio::process::Command::new("python3")
        .arg(interop("oidc/browser.py"))
        .args(["device", &uri, &code, "alice"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Signed in within 60 s (the provider's polling interval is 5 s).
    let c = connect.bridge(&bh).await;
    write(&c, "/workspace/a.txt").await;
    // Past the first token's expiry (4 s, no leeway): only a refreshed token is accepted now.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    write(&c, "/workspace/b.txt").await;
    let _ = c.cancel().await;
}

/// A service called in the user's name (`crm.account_notes`): the session started from a real
/// provider token (here the agent host's own, client credentials); at the call Bulkhead
/// exchanges that token at the provider (RFC 8693, as its upstream client) for one of the
/// service's audience, which the service receives as the bearer. The audit names the token by
/// its audience and id, never the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_called_with_the_users_own_exchanged_token() {
    use super::procs::{Deployment, Store};
    let provider = tokio::task::spawn_blocking(|| {
        start_provider(json!({
            "resource": "urn:bulkhead",
            "audience": "bulkhead-deployment",
            "resources": [{"resource": "urn:crm-api", "audience": "crm-api"}],
            "resource_scopes": ["read"],
            "signing_alg": "ES256",
            "users": [],
            "clients": [
                {"client_id": "agent-host", "client_secret": "agent-host-secret-0123456789",
                 "grant_types": ["client_credentials"]},
                {"client_id": "bulkhead-upstream", "client_secret": "upstream-secret-0123456789",
                 "grant_types": ["urn:ietf:params:oauth:grant-type:token-exchange"]}
            ],
        }))
    })
    .await
    .unwrap();
    // The notes service: records the bearer it was called with.
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/accounts/{id}/notes",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let record = record.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                record.lock().unwrap().push(auth);
                axum::Json(json!({"notes": ["renewal due in May"]}))
            }
        }),
    );
    let notes = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let notes_url = format!("http://{}", notes.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(notes, app).await });

    let mut dep = Deployment::new(Store::Sqlite, "upstream-token").await;
    let secret = dep.path().join("upstream-secret");
    std::fs::write(&secret, "upstream-secret-0123456789\n").unwrap();
    std::fs::write(
        &dep.config,
        format!(
            "auth: {{ issuer: test-issuer, audience: bulkhead-test, keys: [] }}\n\
             token_service:\n  signing_key_file: session.pem\n\
             \x20 upstream: {{ client_id: bulkhead-upstream, client_secret_file: {} }}\n\
             \x20 provider: {{ issuer: \"{}\", audience: bulkhead-deployment, oidc_discovery: true }}\n\
             http: {{ allowed_hosts: [localhost, 127.0.0.1], stateful: true }}\n\
             state: {{ dir: state, workspaces: workspaces }}\n",
            secret.display(),
            provider.issuer
        ),
    )
    .unwrap();
    bulkhead::sessions::SigningKey::read_or_make(&dep.path().join("session.pem")).unwrap();
    dep.set_env("CRM_DATABASE_URL", "postgres://nobody@127.0.0.1:1/unused");
    dep.set_env("CRM_API_URL", &notes_url);
    let crm = dep.try_start_server("crm", "full", None).unwrap();

    // The agent host's provider token, exchanged for a session.
    let http = reqwest::Client::new();
    let meta: Value = http
        .get(format!(
            "{}/.well-known/openid-configuration",
            provider.issuer
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let got: Value = http
        .post(meta["token_endpoint"].as_str().unwrap())
        .basic_auth("agent-host", Some("agent-host-secret-0123456789"))
        .form(&[("grant_type", "client_credentials"), ("scope", "read")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let provider_token = got["access_token"].as_str().unwrap().to_owned();
    let issued = bulkhead::client::login::exchange(&format!("{}/token", crm.base), &provider_token)
        .await
        .unwrap();
    let session = bulkhead::sessions::unverified_claims(&issued.access_token);
    assert!(
        session["idp"].is_string(),
        "the provider token rides sealed: {session}"
    );
    assert!(
        !issued.access_token.contains(&provider_token[..40]),
        "and is not readable in the session token"
    );
    let c = crate::harness::client(&crm.url, &issued.access_token).await;
    let tools = c.list_all_tools().await.unwrap();
    let notes_tool = tools.iter().find(|t| t.name == "account_notes").unwrap();
    assert!(
        !serde_json::to_string(&notes_tool.input_schema)
            .unwrap()
            .contains("upstream_token"),
        "the model never sees the token parameter"
    );
    for _ in 0..2 {
        let (err, text, _) = crate::harness::call(&c, "account_notes", json!({"id": 1})).await;
        assert!(!err, "{text}");
        assert!(text.contains("renewal due in May"), "{text}");
    }
    let (err, text, _) = crate::harness::call(
        &c,
        "account_notes",
        json!({"id": 1, "upstream_token": "forged"}),
    )
    .await;
    assert!(err && text.contains("unknown argument"), "{text}");
    let _ = c.cancel().await;
    let bearers = seen.lock().unwrap().clone();
    assert_eq!(bearers.len(), 2, "{bearers:?}");
    let upstream = bearers[0].strip_prefix("Bearer ").expect("a bearer");
    assert_eq!(bearers[0], bearers[1], "cached until it expires");
    let claims = bulkhead::sessions::unverified_claims(upstream);
    assert_eq!(claims["aud"], "crm-api", "{claims}");
    assert_eq!(
        claims["sub"], "agent-host",
        "the user the session started from: {claims}"
    );
    assert_eq!(claims["iss"], provider.issuer.as_str());
    assert_ne!(
        upstream, provider_token,
        "a token of the service's audience, not the provider's"
    );
    // The audit: which token was used, never the token. Records reach the file within the
    // writer's sync interval; wait for them (bounded).
    let path = dep.path().join("state/audit-crm.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (audit, rec) = loop {
        let audit = std::fs::read_to_string(&path).unwrap_or_default();
        let rec = audit
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["tool"] == "account_notes" && r["phase"] == "outcome");
        if let Some(rec) = rec {
            break (audit, rec);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit record of the call:\n{audit}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(!audit.contains(upstream) && !audit.contains(&provider_token));
    assert_eq!(
        rec["args"]["bound"]["upstream_token"],
        format!(
            "token for crm-api (jti {})",
            claims["jti"].as_str().unwrap()
        ),
        "{rec}"
    );

    // A refresh token used twice ends its family, and with it the exchanges in the user's name
    // (a thief holding the session token keeps no upstream reach).
    let refresh = issued.refresh_token.clone().expect("a refresh token");
    for want in [200, 400] {
        let r = http
            .post(format!("{}/token", crm.base))
            .form(&[("grant_type", "refresh_token"), ("refresh_token", &refresh)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), want);
    }
    let c = crate::harness::client(&crm.url, &issued.access_token).await;
    let (err, text, _) = crate::harness::call(&c, "account_notes", json!({"id": 1})).await;
    assert!(err && text.contains("revoked"), "{text}");
    let _ = c.cancel().await;
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "the service was not called again"
    );
}

/// `bulkhead connect` with a native client at the provider signs the user in in a browser: the
/// authorization code with PKCE, redirected to a loopback port it listens on (RFC 8252). A
/// redirect that is not this sign-in's (another `state`) is ignored; the real one is redeemed,
/// exchanged for a session, and the bridge serves calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_connect_signs_in_in_a_browser_and_bridges_a_session() {
    connect_signs_in_in_a_browser(false).await;
}

/// The same with opaque provider tokens: the exchange introspects them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_connect_signs_in_in_a_browser_where_tokens_are_opaque() {
    connect_signs_in_in_a_browser(true).await;
}

async fn connect_signs_in_in_a_browser(opaque: bool) {
    let clients = json!([{
        "client_id": "bulkhead-desktop", "token_endpoint_auth_method": "none",
        "application_type": "native", "redirect_uris": ["http://127.0.0.1/callback"],
        "grant_types": ["authorization_code"]
    }]);
    let provider = tokio::task::spawn_blocking(move || {
        if opaque {
            opaque_provider(clients)
        } else {
            test_provider(clients)
        }
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lines = if opaque {
        introspection_lines(dir.path(), &["bulkhead-desktop"])
    } else {
        String::new()
    };
    let bh = start_bulkhead_with(&provider, NetworkMode::Full, 600, &lines).await;
    let mut connect = Connect::start(
        &provider,
        &bh,
        "{ native_client_id: bulkhead-desktop, scope: openid email read }",
    );
    let prompt = connect.line_with("to sign in, open ").await;
    let url = prompt.split("open ").nth(1).unwrap().trim().to_owned();
    let redirect = query(&url)["redirect_uri"].clone();
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    // Not this sign-in: ignored, the listener keeps waiting.
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{redirect}?code=stolen&state=forged"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // A local process that connects and says nothing does not hold the port.
    let port = reqwest::Url::parse(&redirect).unwrap().port().unwrap();
    let _stall = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // The user signs in; the browser lands on the loopback redirect.
    let landed = follow(&url, "alice", &redirect).await;
    let page = http.get(&landed).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Signed in"));
    let c = connect.bridge(&bh).await;
    write(&c, "/workspace/b.txt").await;
    let _ = c.cancel().await;
}

/// alice's access token from `provider` for the public device client `client`, by the device
/// grant (the scripted user approves; polled within 60 s).
async fn device_token(provider: &Provider, client: &str) -> String {
    let http = reqwest::Client::new();
    let meta: Value = http
        .get(format!(
            "{}/.well-known/openid-configuration",
            provider.issuer
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let started: Value = http
        .post(meta["device_authorization_endpoint"].as_str().unwrap())
        .form(&[("client_id", client), ("scope", "openid email read")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let out = tokio::process::Command::new("python3")
        .arg(interop("oidc/browser.py"))
        .args([
            "device",
            started["verification_uri"].as_str().unwrap(),
            started["user_code"].as_str().unwrap(),
            "alice",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let got: Value = http
            .post(meta["token_endpoint"].as_str().unwrap())
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", started["device_code"].as_str().unwrap()),
                ("client_id", client),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(token) = got["access_token"].as_str() {
            return token.to_owned();
        }
        assert!(
            matches!(
                got["error"].as_str(),
                Some("authorization_pending" | "slow_down")
            ),
            "{got}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no token within 60 s: {got}"
        );
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
}

/// RFC 7662: an opaque provider token is exchanged once the provider's introspection says it is
/// active and its client is one the deployment lists; a token of another client is refused, and
/// one the provider revokes is refused once the cached answer (1 s here) has lapsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opaque_token_is_introspected_and_refused_once_the_provider_revokes_it() {
    let device = |id: &str| {
        json!({"client_id": id, "token_endpoint_auth_method": "none",
               "grant_types": ["urn:ietf:params:oauth:grant-type:device_code"]})
    };
    let clients = json!([device("bulkhead-connect"), device("other-app")]);
    let provider = tokio::task::spawn_blocking(move || opaque_provider(clients))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lines = introspection_lines(dir.path(), &["bulkhead-connect"]);
    let bh = start_bulkhead_with(&provider, NetworkMode::Full, 600, &lines).await;
    let endpoint = format!("{}/token", bh.base);

    let token = device_token(&provider, "bulkhead-connect").await;
    assert!(
        !bulkhead::auth::is_jws_shaped(&token),
        "the provider's token is opaque: {token}"
    );
    let issued = bulkhead::client::login::exchange(&endpoint, &token)
        .await
        .expect("an active token of a listed client is exchanged");
    let session = bulkhead::sessions::unverified_claims(&issued.access_token);
    assert_eq!(session["sub"], "alice", "{session}");
    let c = crate::harness::client(&bh.url, &issued.access_token).await;
    write_ok(&c).await;
    let _ = c.cancel().await;

    // A token the same user got for another application names no audience: not accepted here.
    let foreign = device_token(&provider, "other-app").await;
    let refused = bulkhead::client::login::exchange(&endpoint, &foreign)
        .await
        .expect_err("another client's token is refused");
    assert!(refused.contains("introspection.clients"), "{refused}");

    // Revoked at the provider (RFC 7009): refused within the cache time.
    let http = reqwest::Client::new();
    let meta: Value = http
        .get(format!(
            "{}/.well-known/openid-configuration",
            provider.issuer
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r = http
        .post(meta["revocation_endpoint"].as_str().unwrap())
        .form(&[("token", token.as_str()), ("client_id", "bulkhead-connect")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let refused = loop {
        match bulkhead::client::login::exchange(&endpoint, &token).await {
            Err(e) => break e,
            Ok(_) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "a revoked token was still exchanged after 10 s (cache_secs is 1)"
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    assert!(refused.contains("not active"), "{refused}");
    // A made-up opaque token is refused the same way.
    let refused =
        bulkhead::client::login::exchange(&endpoint, "x3kX0pQ9rT1uV2wY4zA5bC6dE7fG8hJ9kL0mN1oP2qR")
            .await
            .expect_err("an unknown token is refused");
    assert!(refused.contains("not active"), "{refused}");
}

/// A `write_file` call that succeeds.
async fn write_ok(c: &rmcp::service::RunningService<rmcp::RoleClient, ()>) {
    let (err, text, _) = crate::harness::call(
        c,
        "write_file",
        json!({"path": "/workspace/o.txt", "content": "x"}),
    )
    .await;
    assert!(!err, "{text}");
}
