//! The token service (issue 35): an identity provider's token, which names no session, is
//! exchanged for a session token of the deployment (RFC 8693) that the instances accept; every
//! refusal the exchange owes is tried against the real endpoint.

use crate::harness::{Instance, call, client, start_with};
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::Arc;

/// The provider's HS256 secret (the provider is not the deployment: its own issuer and key).
const IDP_SECRET: &str = "identity-provider-secret-0123456789abcdef";
const IDP: &str = "https://idp.test";
/// The audience the provider's tokens name for this deployment.
const IDP_AUD: &str = "bulkhead-deployment";

/// A deployment whose `auth` trusts nothing but its own session tokens, with a token service
/// exchanging the provider's tokens; `key` names its signing key file (made when absent).
fn config(dir: &std::path::Path, key: &str) -> Config {
    let d = dir.display();
    let text = format!(
        "auth:\n  issuer: https://bulkhead.test\n  audience: bulkhead-test\n\
         token_service:\n  signing_key_file: {d}/{key}\n  ttl_secs: 600\n  claims: [email]\n  provider:\n    issuer: {IDP}\n    audience: {IDP_AUD}\n    keys:\n      - {{ alg: HS256, secret: {IDP_SECRET} }}\n\
         http:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: true\n\
         state:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n"
    );
    let config = Config::parse(&text, "test", &|_| None).expect("test config");
    let path = dir.join(key);
    if !path.exists() {
        bulkhead::sessions::SigningKey::read_or_make(&path).expect("signing key");
    }
    config
}

async fn deployment(mode: NetworkMode) -> Instance {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    start_with(config(dir.path(), "session.pem"), dir, mode).await
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A token as a provider issues it: `sub`, `scope`, `email`, no session claim.
fn provider_token(claims: Value) -> String {
    let mut payload = json!({
        "iss": IDP, "aud": IDP_AUD, "sub": "ana", "exp": now() + 3600, "iat": now(),
        "scope": "openid mcp", "email": "ana@example.test", "sid": "login-1", "jti": "t-1",
    });
    for (k, v) in claims.as_object().unwrap() {
        if v.is_null() {
            payload.as_object_mut().unwrap().remove(k);
        } else {
            payload[k] = v.clone();
        }
    }
    jsonwebtoken::encode(
        &Header::new(jsonwebtoken::Algorithm::HS256),
        &payload,
        &EncodingKey::from_secret(IDP_SECRET.as_bytes()),
    )
    .unwrap()
}

async fn post_token(inst: &Instance, form: &[(&str, &str)]) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/token", inst.base))
        .form(form)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    (status, resp.json().await.unwrap())
}

const SUBJECT_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

async fn exchange(inst: &Instance, subject: &str, extra: &[(&str, &str)]) -> (u16, Value) {
    let mut form = vec![
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        ("subject_token", subject),
        ("subject_token_type", SUBJECT_TYPE),
    ];
    form.extend_from_slice(extra);
    post_token(inst, &form).await
}

async fn session_token(inst: &Instance, extra: &[(&str, &str)]) -> Value {
    let (status, body) = exchange(inst, &provider_token(json!({})), extra).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The payload of a JWT, unverified (the test reads what the service wrote).
fn payload(token: &str) -> Value {
    use base64::Engine as _;
    let part = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The session level a read reports.
async fn level(inst: &Instance, token: &str) -> String {
    let c = client(&inst.url, token).await;
    let (err, text, level) = call(&c, "read_file", json!({"path": "/workspace/none.txt"})).await;
    assert!(err && text.contains("no such file"), "{text}");
    let _ = c.cancel().await;
    level
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conversations_get_two_sessions_and_a_refresh_keeps_its_session_and_level() {
    let inst = deployment(NetworkMode::Proxied).await;
    let first = session_token(&inst, &[]).await;
    let second = session_token(&inst, &[]).await;
    assert_eq!(first["token_type"], "Bearer");
    assert_eq!(
        first["issued_token_type"],
        "urn:ietf:params:oauth:token-type:access_token"
    );
    assert_eq!(first["expires_in"], 600);
    assert_eq!(first["scope"], "openid mcp");
    let (a, b) = (
        first["access_token"].as_str().unwrap(),
        second["access_token"].as_str().unwrap(),
    );
    let (pa, pb) = (payload(a), payload(b));
    assert_eq!(
        (pa["sub"].as_str(), pb["sub"].as_str()),
        (Some("ana"), Some("ana"))
    );
    assert_ne!(
        pa["session_id"], pb["session_id"],
        "one session per exchange"
    );
    assert_eq!(pa["session_id"], first["session_id"]);
    assert_eq!(
        pa["email"], "ana@example.test",
        "the configured claim is copied"
    );
    assert!(pa.get("sid").is_none() && pa.get("jti") != Some(&json!("t-1")));

    // The first conversation loads a confidential dataset: its ratchet rises, the other's not.
    let c = client(&inst.url, a).await;
    let (err, text, lvl) = call(
        &c,
        "load_sensitive_dataset",
        json!({"dataset_name": "customers"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(lvl, "confidential");
    let _ = c.cancel().await;
    assert_eq!(level(&inst, b).await, "internal");

    // A refresh keeps the session, so the level; the refresh token keeps its fixed expiry.
    let refresh = first["refresh_token"].as_str().unwrap();
    let (status, renewed) = post_token(
        &inst,
        &[("grant_type", "refresh_token"), ("refresh_token", refresh)],
    )
    .await;
    assert_eq!(status, 200, "{renewed}");
    let renewed_token = renewed["access_token"].as_str().unwrap();
    assert_ne!(renewed_token, a);
    assert_eq!(payload(renewed_token)["session_id"], pa["session_id"]);
    assert_eq!(payload(renewed_token)["email"], "ana@example.test");
    assert_eq!(
        payload(renewed["refresh_token"].as_str().unwrap())["exp"],
        payload(refresh)["exp"]
    );
    assert_eq!(level(&inst, renewed_token).await, "confidential");

    // Rotation (RFC 9700 §4.14.2): the refresh token is used up; its second use ends the family,
    // so the token the refresh handed out is refused as well.
    let (status, body) = post_token(
        &inst,
        &[("grant_type", "refresh_token"), ("refresh_token", refresh)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
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
    let (status, body) = post_token(
        &inst,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", renewed["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
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
    // The other conversation's family is untouched.
    let (status, body) = post_token(
        &inst,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", second["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // A refresh token is no access token, and an access token no refresh token.
    let resp = crate::harness::ping_with(&inst.url, refresh).await;
    assert_eq!(resp.status(), 401);
    let (status, body) = post_token(
        &inst,
        &[("grant_type", "refresh_token"), ("refresh_token", a)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_token_used_directly_gets_401_that_leads_to_the_exchange() {
    let inst = deployment(NetworkMode::Full).await;
    let resp = crate::harness::ping_with(&inst.url, &provider_token(json!({}))).await;
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"invalid_token\"")
            && challenge.contains(&format!("{}/token", inst.base))
            && challenge.contains("/.well-known/oauth-protected-resource"),
        "{challenge}"
    );
    // The metadata names the authorization server, whose metadata names the token endpoint and
    // the key set that verifies session tokens.
    let http = reqwest::Client::new();
    let meta: Value = http
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            inst.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["token_endpoint"], format!("{}/token", inst.base));
    assert!(
        meta["grant_types_supported"]
            .as_array()
            .unwrap()
            .contains(&json!("urn:ietf:params:oauth:grant-type:token-exchange"))
    );
    let jwks: Value = http
        .get(meta["jwks_uri"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = session_token(&inst, &[]).await["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::ES256);
    assert_eq!(jwks["keys"][0]["kid"].as_str(), header.kid.as_deref());
    assert!(jwks["keys"][0].get("d").is_none(), "no private part");
    // The exchanged token is accepted.
    let c = client(&inst.url, &token).await;
    assert!(!c.list_all_tools().await.unwrap().is_empty());
    let _ = c.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_misaddressed_foreign_and_malformed_requests_are_refused() {
    let inst = deployment(NetworkMode::Full).await;
    let foreign = {
        let payload = json!({"iss": "https://evil.test", "aud": IDP_AUD, "sub": "ana",
                             "exp": now() + 300});
        jsonwebtoken::encode(
            &Header::new(jsonwebtoken::Algorithm::HS256),
            &payload,
            &EncodingKey::from_secret(b"attacker-secret-0123456789abcdef-0123"),
        )
        .unwrap()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            provider_token(json!({"exp": now() - 600})),
            "token expired",
        ),
        (
            "wrong audience",
            provider_token(json!({"aud": "someone-else"})),
            "another audience",
        ),
        (
            "foreign issuer",
            provider_token(json!({"iss": "https://evil.test"})),
            "unexpected issuer",
        ),
        ("foreign key", foreign, "signature"),
        (
            "sub that cannot name a user",
            provider_token(json!({"sub": "../root"})),
            "cannot name a user",
        ),
        ("no sub", provider_token(json!({"sub": null})), "`sub`"),
    ];
    for (what, subject, says) in cases {
        let (status, body) = exchange(&inst, &subject, &[]).await;
        assert_eq!(status, 400, "{what}: {body}");
        assert_eq!(body["error"], "invalid_grant", "{what}: {body}");
        let text = body["error_description"].as_str().unwrap();
        assert!(text.contains(says), "{what}: {text}");
    }
    let good = provider_token(json!({}));
    type Form<'a> = Vec<(&'a str, &'a str)>;
    let requests: Vec<(&str, Form, &str)> = vec![
        (
            "no grant type",
            vec![("subject_token", &good)],
            "invalid_request",
        ),
        (
            "unknown grant",
            vec![("grant_type", "password")],
            "unsupported_grant_type",
        ),
        (
            "no subject type",
            vec![
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:token-exchange",
                ),
                ("subject_token", &good),
            ],
            "invalid_request",
        ),
        (
            "repeated parameter",
            vec![
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:token-exchange",
                ),
                ("subject_token", &good),
                ("subject_token", &good),
                ("subject_token_type", SUBJECT_TYPE),
            ],
            "invalid_request",
        ),
    ];
    for (what, form, code) in requests {
        let (status, body) = post_token(&inst, &form).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some(code)),
            "{what}: {body}"
        );
    }
    let (status, body) = exchange(&inst, &good, &[("scope", "openid admin")]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope")),
        "{body}"
    );
    let (status, body) = exchange(&inst, &good, &[("audience", "other")]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target")),
        "{body}"
    );
    let (status, body) = exchange(&inst, &good, &[("session_id", "../etc")]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_names_the_session_and_acts_for_the_user() {
    let inst = deployment(NetworkMode::Full).await;
    let host = provider_token(json!({"sub": "agent-host", "email": null}));
    let body = session_token(
        &inst,
        &[
            ("session_id", "conv-7"),
            ("actor_token", &host),
            ("actor_token_type", SUBJECT_TYPE),
            ("scope", "mcp"),
        ],
    )
    .await;
    let p = payload(body["access_token"].as_str().unwrap());
    assert_eq!(p["session_id"], "conv-7");
    assert_eq!(p["act"], json!({"sub": "agent-host"}));
    assert_eq!(p["scope"], "mcp");
    // An address the provider marks unverified is not copied (it would name somebody else).
    let unverified = provider_token(json!({"email_verified": false}));
    let (status, body) = exchange(&inst, &unverified, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        payload(body["access_token"].as_str().unwrap())
            .get("email")
            .is_none()
    );
    // Naming a session reaches the user's own session only: the ratchet is keyed by (sub,
    // session), and `sub` is the subject token's.
    let other = provider_token(json!({"sub": "bob"}));
    let (status, body) = exchange(&inst, &other, &[("session_id", "conv-7")]).await;
    assert_eq!(status, 200);
    assert_eq!(
        payload(body["access_token"].as_str().unwrap())["sub"],
        "bob"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_token_of_one_deployment_is_refused_by_another() {
    let a = deployment(NetworkMode::Full).await;
    let b = deployment(NetworkMode::Full).await;
    let token = session_token(&a, &[]).await["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = crate::harness::ping_with(&b.url, &token).await;
    assert_eq!(resp.status(), 401, "same issuer and audience, another key");
}

/// The README's agent-host example (Python SDK): one exchange per conversation, two sessions,
/// two ratchets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_agent_host_exchanges_per_conversation() {
    let inst = deployment(NetworkMode::Proxied).await;
    let out =
        crate::python_sdk::run_client("agent_host.py", &inst.url, &provider_token(json!({}))).await;
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the host prints JSON");
    assert_ne!(seen["sessions"][0], seen["sessions"][1], "{seen}");
    assert_eq!(
        seen["loaded"],
        json!({"error": false, "level": "confidential"}),
        "{seen}"
    );
    assert_eq!(seen["other"]["level"], "internal", "{seen}");
}

/// A session token minted from a subject token with 20 s left lives at most those 20 s (it lived
/// the full `ttl_secs`, 600 s); the refresh token follows the refresh policy
/// (`token_service.refresh_ttl_secs`), stated in the configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_token_never_outlives_the_subject_token_it_was_minted_from() {
    let inst = deployment(NetworkMode::Full).await;
    let subject_exp = now() + 20;
    let (status, body) = exchange(&inst, &provider_token(json!({"exp": subject_exp})), &[]).await;
    assert_eq!(status, 200, "{body}");
    let minted = payload(body["access_token"].as_str().unwrap());
    assert!(
        minted["exp"].as_u64().unwrap() <= subject_exp,
        "session token exp {} past the subject's {subject_exp}",
        minted["exp"]
    );
    assert!(body["expires_in"].as_u64().unwrap() <= 20, "{body}");
    // A subject with longer to live than ttl_secs: the session token lives ttl_secs.
    let long = session_token(&inst, &[]).await;
    assert!(long["expires_in"].as_u64().unwrap() > 20, "{long}");
}
