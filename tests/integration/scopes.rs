//! Scope requirements per permission (`auth.scopes`): a token without the scope a tool's
//! permission requires is refused by the wrapper, saying which scope; `tools/list` is the same for
//! every caller; the resource metadata lists the scopes.

use crate::harness::{SECRET, call, client, start_with};
use bulkhead::policy::NetworkMode;
use serde_json::{Value, json};
use std::sync::Arc;

fn token(user: &str, scope: Option<&str>) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let mut claims = json!({"sub": user, "session_id": "s1", "iss": "test-issuer",
                            "aud": "bulkhead-test", "iat": now, "exp": now + 300});
    if let Some(s) = scope {
        claims["scope"] = Value::from(s);
    }
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("dev".into());
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_scope_is_refused_by_name_and_the_listing_is_the_same() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut cfg = crate::harness::config(dir.path(), true);
    cfg.auth.scopes.write = Some("mcp:write".into());
    cfg.auth.scopes.connect = Some("mcp:connect".into());
    let inst = start_with(cfg, dir, NetworkMode::Full).await;

    let writer = client(&inst.url, &token("wanda", Some("openid mcp:write"))).await;
    let reader = client(&inst.url, &token("rita", None)).await;
    let args = json!({"path": "/workspace/a.txt", "content": "x"});
    let (err, text, _) = call(&writer, "write_file", args.clone()).await;
    assert!(!err, "{text}");
    let (err, text, _) = call(&reader, "write_file", args).await;
    assert!(err, "no scope, no write");
    assert!(
        text.starts_with("[FATAL]") && text.contains("`mcp:write`"),
        "{text}"
    );
    let (err, text, _) = call(&reader, "read_file", json!({"path": "/workspace/none.txt"})).await;
    assert!(
        !text.contains("scope"),
        "read needs no scope here: {err} {text}"
    );
    let (err, text, _) = call(
        &writer,
        "notify_team",
        json!({"channel": "ops", "message": "hi"}),
    )
    .await;
    assert!(err && text.contains("`mcp:connect`"), "{text}");

    let a = writer.list_all_tools().await.unwrap();
    let b = reader.list_all_tools().await.unwrap();
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::to_value(&b).unwrap()
    );

    let meta: Value = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource",
        inst.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        meta["scopes_supported"],
        json!(["mcp:write", "mcp:connect"])
    );
}
