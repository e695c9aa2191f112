//! Keys from an identity provider: a local OIDC provider on 127.0.0.1 (discovery document and a
//! JWKS it rotates mid-test) and a real instance configured with `oidc_discovery: true`.
//! A token signed by the rotated-in key is accepted without a restart, one by the rotated-out
//! key is refused, a provider outage keeps the last good set, and forged tokens fail.

use crate::harness::{SECRET, start_with};
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use bulkhead::policy::NetworkMode;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::tls;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/auth");
const RSA_KID: &str = "jwks-rs-1";
const EC_KID: &str = "jwks-es-1";

/// A minimal OIDC provider: discovery, and a JWKS the test can replace or break.
struct Idp {
    base: String,
    jwks: Mutex<Value>,
    fetches: AtomicU32,
    broken: AtomicBool,
}

async fn discovery(State(idp): State<Arc<Idp>>) -> axum::Json<Value> {
    axum::Json(json!({
        "issuer": idp.base,
        "jwks_uri": format!("{}/jwks", idp.base),
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }))
}

async fn jwks(State(idp): State<Arc<Idp>>) -> axum::response::Response {
    use axum::response::IntoResponse;
    idp.fetches.fetch_add(1, Ordering::SeqCst);
    if idp.broken.load(Ordering::SeqCst) {
        return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    axum::Json(idp.jwks.lock().unwrap().clone()).into_response()
}

async fn idp() -> Arc<Idp> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/jwks.json")).unwrap())
            .unwrap();
    let rsa_only = json!({"keys": [all["keys"][0].clone()]});
    let idp = Arc::new(Idp {
        base,
        jwks: Mutex::new(rsa_only),
        fetches: AtomicU32::new(0),
        broken: AtomicBool::new(false),
    });
    let app = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .with_state(idp.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    idp
}

fn sign(idp: &Idp, alg: Algorithm, pem: &str, kid: &str, user: &str) -> String {
    let material = std::fs::read(format!("{FIXTURES}/{pem}")).unwrap();
    let key = match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(&material).unwrap(),
        _ => EncodingKey::from_rsa_pem(&material).unwrap(),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"sub": user, "session_id": "s1", "iss": idp.base, "aud": "bulkhead-test",
                        "iat": now, "exp": now + 300});
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

fn config(dir: &std::path::Path, issuer: &str, extra: &str) -> bulkhead::config::Config {
    let d = dir.display().to_string();
    let text = format!(
        "auth:\n  issuer: \"{issuer}\"\n  audience: bulkhead-test\n{extra}http:\n  allowed_hosts: [localhost, 127.0.0.1]\nstate:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n"
    );
    bulkhead::config::Config::parse(&text, "test", &|_| None).expect("test config")
}

/// Status of an authenticated `initialize`.
async fn status(url: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "jwks-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_are_picked_up_and_removed_keys_refused_without_restart() {
    let idp = idp().await;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    // Refetch on an unknown kid at once (the default waits 30 s between such fetches).
    let cfg = config(
        dir.path(),
        &idp.base,
        "  oidc_discovery: true\n  jwks_min_refetch_secs: 0\n",
    );
    let inst = start_with(cfg, dir, NetworkMode::Full).await;

    let rsa = sign(
        &idp,
        Algorithm::RS256,
        "jwks_rsa_private.pem",
        RSA_KID,
        "alice",
    );
    let ec = sign(&idp, Algorithm::ES256, "jwks_ec_private.pem", EC_KID, "bob");
    assert_eq!(
        status(&inst.url, &rsa).await,
        200,
        "the provider's current key"
    );
    assert_eq!(
        status(&inst.url, &ec).await,
        401,
        "a key the provider does not publish yet"
    );

    // The provider rotates: the EC key in, the RSA key out.
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/jwks.json")).unwrap())
            .unwrap();
    *idp.jwks.lock().unwrap() = json!({"keys": [all["keys"][1].clone()]});
    assert_eq!(
        status(&inst.url, &ec).await,
        200,
        "the rotated-in key, no restart"
    );
    assert_eq!(status(&inst.url, &rsa).await, 401, "the rotated-out key");

    // An outage keeps the last good set: the current key still works, nothing widens.
    idp.broken.store(true, Ordering::SeqCst);
    assert_eq!(
        status(&inst.url, &ec).await,
        200,
        "last good set kept during an outage"
    );
    assert_eq!(status(&inst.url, &rsa).await, 401);

    // Forgeries: the right kid signed by another key; an HMAC token keyed with the public key
    // material's kid (algorithm confusion); an unknown kid flood is rate-limited by design.
    let forged = sign(&idp, Algorithm::ES256, "ec_private.pem", EC_KID, "mallory");
    assert_eq!(
        status(&inst.url, &forged).await,
        401,
        "right kid, wrong key"
    );
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(EC_KID.into());
    let now = jsonwebtoken::get_current_timestamp();
    let hmac = jsonwebtoken::encode(
        &header,
        &json!({"sub": "mallory", "session_id": "s1", "iss": idp.base, "aud": "bulkhead-test", "exp": now + 300}),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    assert_eq!(
        status(&inst.url, &hmac).await,
        401,
        "HS256 under a public key's kid"
    );

    // RFC 9728 metadata names the provider by its issuer URL.
    let meta: Value = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource",
        inst.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(meta["authorization_servers"], json!([idp.base]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kids_cannot_make_the_server_hammer_the_provider() {
    let idp = idp().await;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cfg = config(
        dir.path(),
        &idp.base,
        "  oidc_discovery: true\n  jwks_min_refetch_secs: 60\n",
    );
    let inst = start_with(cfg, dir, NetworkMode::Full).await;
    let rsa = sign(
        &idp,
        Algorithm::RS256,
        "jwks_rsa_private.pem",
        RSA_KID,
        "alice",
    );
    assert_eq!(status(&inst.url, &rsa).await, 200);
    let before = idp.fetches.load(Ordering::SeqCst);
    for i in 0..50 {
        let t = sign(
            &idp,
            Algorithm::RS256,
            "jwks_rsa_private.pem",
            &format!("nope-{i}"),
            "alice",
        );
        assert_eq!(status(&inst.url, &t).await, 401);
    }
    let extra = idp.fetches.load(Ordering::SeqCst) - before;
    assert!(
        extra <= 1,
        "50 unknown kids caused {extra} fetches (at most one per minute)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keys_from_the_provider_every_token_is_refused() {
    let idp = idp().await;
    idp.broken.store(true, Ordering::SeqCst);
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cfg = config(
        dir.path(),
        &idp.base,
        "  oidc_discovery: true\n  jwks_min_refetch_secs: 0\n",
    );
    let inst = start_with(cfg, dir, NetworkMode::Full).await;
    let rsa = sign(
        &idp,
        Algorithm::RS256,
        "jwks_rsa_private.pem",
        RSA_KID,
        "alice",
    );
    assert_eq!(
        status(&inst.url, &rsa).await,
        401,
        "fail closed while no key was ever fetched"
    );
    idp.broken.store(false, Ordering::SeqCst);
    assert_eq!(
        status(&inst.url, &rsa).await,
        200,
        "accepted once the provider answers"
    );
}

#[test]
fn remote_key_sources_must_be_https_or_local() {
    let dir = tempfile::tempdir().unwrap();
    for (issuer, extra, want) in [
        (
            "http://idp.example.com",
            "  oidc_discovery: true\n",
            "https://",
        ),
        ("bulkhead-dev", "  oidc_discovery: true\n", "not a URL"),
        (
            "https://idp.example.com",
            "  jwks_url: http://idp.example.com/jwks\n",
            "https://",
        ),
        (
            "https://idp.example.com",
            "  jwks_url: https://idp.example.com/jwks\n  oidc_discovery: true\n",
            "not both",
        ),
    ] {
        let cfg = config(dir.path(), issuer, extra);
        let err = bulkhead::auth::Verifier::new(&cfg.auth)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{issuer} {extra}: {err}");
    }
}

/// The provider over HTTPS with an internal CA: trusted through `jwks_ca_file`, refused without
/// it (TLS is verified; an untrusted provider gives no keys, so every token is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_provider_with_an_internal_ca_is_trusted_only_through_jwks_ca_file() {
    let tls = tempfile::tempdir().unwrap();
    tls::test_ca(tls.path(), "DNS:localhost,IP:127.0.0.1");
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/jwks.json")).unwrap())
            .unwrap();
    std::fs::write(
        tls.path().join("jwks.json"),
        json!({"keys": [all["keys"][0].clone()]}).to_string(),
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/https_idp.py");
    let port_file = tls.path().join("port");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg(&port_file)
        .arg(tls.path().join("srv.pem"))
        .arg(tls.path().join("srv.key"))
        .arg(tls.path().join("jwks.json"))
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTPS provider did not start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let issuer = format!("https://localhost:{port}");
    let idp = Idp {
        base: issuer.clone(),
        jwks: Mutex::new(Value::Null),
        fetches: AtomicU32::new(0),
        broken: AtomicBool::new(false),
    };
    let rsa = sign(
        &idp,
        Algorithm::RS256,
        "jwks_rsa_private.pem",
        RSA_KID,
        "alice",
    );

    let ca = tls.path().join("ca.pem").display().to_string();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cfg = config(
        dir.path(),
        &issuer,
        &format!("  oidc_discovery: true\n  jwks_ca_file: {ca}\n"),
    );
    let trusted = start_with(cfg, dir, NetworkMode::Full).await;
    assert_eq!(
        status(&trusted.url, &rsa).await,
        200,
        "keys fetched over verified TLS"
    );

    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cfg = config(
        dir.path(),
        &issuer,
        "  oidc_discovery: true\n  jwks_min_refetch_secs: 0\n",
    );
    let untrusted = start_with(cfg, dir, NetworkMode::Full).await;
    assert_eq!(
        status(&untrusted.url, &rsa).await,
        401,
        "an unverified provider gives no keys"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_off_the_https_or_local_rule_is_not_followed() {
    // The configured JWKS URL (local) redirects to plain http on a non-local name. `0.0.0.0` is
    // not a loopback name for the rule, yet connecting to it reaches this machine only, so the
    // test sends nothing anywhere even when the redirect is followed (before the fix it was).
    let idp = idp().await;
    let port = idp.base.rsplit_once(':').unwrap().1.to_string();
    let redirector = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let redirect_url = format!("http://{}/jwks", redirector.local_addr().unwrap());
    let target = format!("http://0.0.0.0:{port}/jwks");
    let app = Router::new().route(
        "/jwks",
        get(move || {
            let target = target.clone();
            async move { axum::response::Redirect::temporary(&target) }
        }),
    );
    tokio::spawn(async move { axum::serve(redirector, app).await.unwrap() });
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cfg = config(
        dir.path(),
        &idp.base,
        &format!("  jwks_url: \"{redirect_url}\"\n  jwks_min_refetch_secs: 0\n"),
    );
    let inst = start_with(cfg, dir, NetworkMode::Full).await;
    let rsa = sign(
        &idp,
        Algorithm::RS256,
        "jwks_rsa_private.pem",
        RSA_KID,
        "alice",
    );
    assert_eq!(status(&inst.url, &rsa).await, 401);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        idp.fetches.load(Ordering::SeqCst),
        0,
        "the redirect to plain http off this machine's names was followed"
    );
}
