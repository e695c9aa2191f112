//! Streamable HTTP with real tokens: 401s, metadata, tools, `_meta`, mode refusals, session
//! binding, and 32 concurrent sessions that never see each other's files or levels.

use crate::harness::{call, client, expired_token, start, token, token_for};
use bulkhead::policy::NetworkMode;
use serde_json::json;
use std::sync::Arc;

const ACCEPT: &str = "application/json, text/event-stream";

fn init_body() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

async fn post(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: serde_json::Value,
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .json(&body);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.send().await.expect("request")
}

#[tokio::test]
async fn bad_tokens_get_401_with_resource_metadata() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let forged = {
        let t = token("alice", "s1");
        let (head, sig) = t.rsplit_once('.').unwrap();
        format!("{head}.{}", sig.chars().rev().collect::<String>())
    };
    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("garbage", Some("not-a-token".into())),
        ("expired", Some(expired_token("alice", "s1"))),
        (
            "wrong audience",
            Some(token_for("alice", "s1", "another-server", 600)),
        ),
        ("forged signature", Some(forged)),
    ];
    for (what, tok) in cases {
        let resp = post(&inst.url, tok.as_deref(), None, init_body()).await;
        assert_eq!(resp.status(), 401, "{what}");
        let challenge = resp
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert!(
            challenge.starts_with("Bearer resource_metadata=\""),
            "{what}: {challenge}"
        );
        assert!(
            challenge.contains(&format!(
                "{}/.well-known/oauth-protected-resource",
                inst.base
            )),
            "{what}: {challenge}"
        );
    }
    let meta: serde_json::Value = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource",
        inst.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(meta["resource"], json!(inst.url));
    // `test-issuer` is not a URL, so no authorization server is announced (RFC 9728 wants
    // issuer URLs; the JWKS tests check a real one).
    assert!(meta.get("authorization_servers").is_none(), "{meta}");
    let health = reqwest::get(format!("{}/healthz", inst.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(health, "ok full\n");
}

#[tokio::test]
async fn a_foreign_host_header_is_refused() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let resp = reqwest::Client::new()
        .post(&inst.url)
        .header("host", "evil.example")
        .header("accept", ACCEPT)
        .header("authorization", format!("Bearer {}", token("alice", "s1")))
        .json(&init_body())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        403,
        "DNS-rebinding protection refuses unknown Host values"
    );
}

#[tokio::test]
async fn a_transport_session_cannot_be_used_with_another_subjects_token() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let resp = post(&inst.url, Some(&token("alice", "s1")), None, init_body()).await;
    assert_eq!(resp.status(), 200);
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .expect("stateful server opens a session")
        .to_str()
        .unwrap()
        .to_string();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let stolen = post(
        &inst.url,
        Some(&token("bob", "s9")),
        Some(&sid),
        list.clone(),
    )
    .await;
    assert_eq!(
        stolen.status(),
        403,
        "bob may not ride alice's transport session"
    );
    let other_session = post(&inst.url, Some(&token("alice", "s2")), Some(&sid), list).await;
    assert_eq!(other_session.status(), 403, "nor may alice's other session");
}

#[tokio::test]
async fn a_stock_client_lists_and_calls_tools_with_level_in_meta() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let full = start(dir.clone(), NetworkMode::Full, true).await;
    let proxied = start(dir, NetworkMode::Proxied, true).await;
    let tok = token("alice", "s1");
    let c = client(&full.url, &tok).await;
    let tools = c.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "delete_file",
            "load_sensitive_dataset",
            "notify_team",
            "read_file",
            "run_python",
            "search_logs",
            "search_records",
            "search_security_logs",
            "write_file"
        ]
    );
    let notify = tools.iter().find(|t| t.name == "notify_team").unwrap();
    let ann = notify.annotations.clone().unwrap();
    assert_eq!(
        (ann.read_only_hint, ann.open_world_hint),
        (Some(false), Some(true))
    );
    // Declared results: handler tools with `returns:` and SQL SELECT tools list an outputSchema,
    // and what they return matches it.
    for (name, declared) in [
        ("search_records", true),
        ("load_sensitive_dataset", true),
        ("read_file", false),
        ("notify_team", false),
    ] {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        assert_eq!(t.output_schema.is_some(), declared, "{name}");
    }
    let rows_schema = serde_json::Value::Object(
        (*tools
            .iter()
            .find(|t| t.name == "search_records")
            .unwrap()
            .output_schema
            .clone()
            .unwrap())
        .clone(),
    );
    let rows = client(&proxied.url, &token("alice", "s-rows")).await;
    let result = rows
        .call_tool(
            rmcp::model::CallToolRequestParams::new("search_records")
                .with_arguments(json!({"query": "a"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let structured = result.structured_content.expect("a row set");
    let validator = jsonschema::validator_for(&rows_schema).unwrap();
    assert!(
        validator.is_valid(&structured),
        "{structured} against {rows_schema}"
    );
    rows.cancel().await.unwrap();

    let (err, text, level) = call(
        &c,
        "write_file",
        json!({"path": "/workspace/a.txt", "content": "alpha"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(level, "internal");
    assert_eq!(
        call(&c, "read_file", json!({"path": "/workspace/a.txt"})).await,
        (false, "alpha".into(), "internal".into())
    );
    let (err, text, _) = call(&c, "read_file", json!({})).await;
    assert!(
        err && text.contains("`path` is required") && !text.starts_with("[FATAL]"),
        "{text}"
    );

    // The full instance refuses the sensitive load and names the instance to use.
    let (err, text, level) = call(
        &c,
        "load_sensitive_dataset",
        json!({"dataset_name": "customers"}),
    )
    .await;
    assert!(
        err && text.starts_with("[FATAL] ") && text.contains("url_proxied"),
        "{text}"
    );
    assert_eq!(level, "internal");
    // The proxied instance serves it; it shares the compliance store with the full one.
    let p = client(&proxied.url, &tok).await;
    let (err, text, level) = call(
        &p,
        "load_sensitive_dataset",
        json!({"dataset_name": "customers"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(level, "confidential");
    // A client that keeps calling the full instance is refused from now on.
    let (err, text, level) = call(&c, "read_file", json!({"path": "/workspace/a.txt"})).await;
    assert!(err && text.starts_with("[FATAL] "), "{text}");
    assert_eq!(level, "confidential");
    let (err, text, _) = call(
        &p,
        "notify_team",
        json!({"channel": "ops", "message": "leak"}),
    )
    .await;
    assert!(err && text.contains("connect tools stay blocked"), "{text}");
    // The workspace followed the session to the other instance.
    assert_eq!(
        call(&p, "read_file", json!({"path": "/workspace/a.txt"}))
            .await
            .1,
        "alpha"
    );
    c.cancel().await.unwrap();
    p.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_concurrent_sessions_stay_apart() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = Arc::new(start(dir, NetworkMode::Proxied, true).await);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let inst = inst.clone();
        tasks.push(tokio::spawn(async move {
            // Users repeat across sessions: u0..u7, so isolation is per (user, session).
            let (user, session) = (format!("u{}", i % 8), format!("s{i}"));
            let c = client(&inst.url, &token(&user, &session)).await;
            let mine = format!("secret of session {i}");
            for round in 0..5 {
                let (err, text, _) = call(
                    &c,
                    "write_file",
                    json!({"path": "/workspace/mine.txt", "content": format!("{mine} #{round}")}),
                )
                .await;
                assert!(!err, "{text}");
                if i % 2 == 0 && round == 2 {
                    let (err, text, level) = call(
                        &c,
                        "load_sensitive_dataset",
                        json!({"dataset_name": format!("ds_{i}")}),
                    )
                    .await;
                    assert!(!err, "{text}");
                    assert_eq!(level, "confidential");
                }
                let (err, text, level) =
                    call(&c, "read_file", json!({"path": "/workspace/mine.txt"})).await;
                assert!(!err, "{text}");
                assert_eq!(
                    text,
                    format!("{mine} #{round}"),
                    "session {i} saw someone else's file"
                );
                let expect = if i % 2 == 0 && round >= 2 {
                    "confidential"
                } else {
                    "internal"
                };
                assert_eq!(
                    level, expect,
                    "session {i} round {round} saw another session's level"
                );
            }
            c.cancel().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn origins_outside_the_allowlist_are_refused() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let send = |origin: &'static str| {
        let url = inst.url.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .header("origin", origin)
                .header("accept", ACCEPT)
                .header("authorization", format!("Bearer {}", token("alice", "s1")))
                .json(&init_body())
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(
        send("http://evil.example").await,
        403,
        "a page on another origin cannot drive the server"
    );
    assert_eq!(
        send("http://agent.example:3000").await,
        200,
        "the configured origin works"
    );
    // Checked before anything else: without a token it is 403, not 401, and on a route rmcp
    // does not serve (`/metrics`) too.
    let no_token = reqwest::Client::new()
        .post(inst.url.clone())
        .header("origin", "http://evil.example")
        .header("accept", ACCEPT)
        .json(&init_body())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(
        no_token, 403,
        "the Origin is refused before the token is read"
    );
    let metrics = reqwest::Client::new()
        .get(inst.url.replace("/mcp", "/metrics"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(metrics, 403);
}

/// At the per-identity session limit, with every session in use, a foreign Origin still gets
/// 403 (the DNS-rebinding and cross-origin check comes first), never the limit's 429.
#[tokio::test]
async fn a_foreign_origin_is_refused_before_any_session_limit() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut config = crate::harness::config(dir.path(), true);
    config.http.max_sessions_per_identity = 1;
    let inst = crate::harness::start_with(config, dir, NetworkMode::Full).await;
    let first = reqwest::Client::new()
        .post(inst.url.clone())
        .header("accept", ACCEPT)
        .header("authorization", format!("Bearer {}", token("alice", "s1")))
        .json(&init_body())
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let sid = first.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // Keep the session in use (its standalone stream open): it cannot be evicted.
    let _stream = reqwest::Client::new()
        .get(inst.url.clone())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", format!("Bearer {}", token("alice", "s1")))
        .send()
        .await
        .unwrap();
    let second = |origin: Option<&'static str>| {
        let url = inst.url.clone();
        async move {
            let mut req = reqwest::Client::new()
                .post(url)
                .header("accept", ACCEPT)
                .header("authorization", format!("Bearer {}", token("alice", "s1")))
                .json(&init_body());
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            req.send().await.unwrap().status()
        }
    };
    assert_eq!(second(None).await, 429, "the limit holds");
    assert_eq!(second(Some("http://evil.example")).await, 403);
}

/// The shipped config.yaml: a foreign Origin gets 403, a local one and none pass.
#[tokio::test]
async fn the_shipped_config_refuses_foreign_origins() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let shipped =
        bulkhead::config::Config::parse(bulkhead::config::EMBEDDED, "config.yaml", &|_| None)
            .expect("the shipped config parses");
    let mut config = crate::harness::config(dir.path(), true);
    config.http = shipped.http;
    let inst = crate::harness::start_with(config, dir, NetworkMode::Full).await;
    let send = |origin: Option<&'static str>| {
        let url = inst.url.clone();
        async move {
            let mut req = reqwest::Client::new()
                .post(url)
                .header("accept", ACCEPT)
                .header("authorization", format!("Bearer {}", token("alice", "s1")))
                .json(&init_body());
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            req.send().await.unwrap().status()
        }
    };
    assert_eq!(send(Some("http://evil.example.com")).await, 403);
    assert_eq!(
        send(Some("http://localhost:6274")).await,
        200,
        "a local page (e.g. the Inspector)"
    );
    assert_eq!(send(None).await, 200, "a non-browser client");
}

#[tokio::test]
async fn stateless_serving_works_with_the_same_guarantees() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let full = start(dir.clone(), NetworkMode::Full, false).await;
    let resp = post(&full.url, Some(&token("alice", "s1")), None, init_body()).await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers().get("mcp-session-id").is_none(),
        "no transport session when stateless"
    );
    let c = client(&full.url, &token("alice", "s1")).await;
    assert!(
        !call(
            &c,
            "write_file",
            json!({"path": "/workspace/s.txt", "content": "stateless"})
        )
        .await
        .0
    );
    assert_eq!(
        call(&c, "read_file", json!({"path": "/workspace/s.txt"})).await,
        (false, "stateless".into(), "internal".into())
    );
    let other = client(&full.url, &token("bob", "s1")).await;
    let lists = (
        c.list_all_tools().await.unwrap(),
        other.list_all_tools().await.unwrap(),
    );
    assert_eq!(lists.0, lists.1, "tools/list is the same for every caller");
    assert!(
        call(&other, "read_file", json!({"path": "/workspace/s.txt"}))
            .await
            .0,
        "bob cannot read alice's file"
    );
    c.cancel().await.unwrap();
    other.cancel().await.unwrap();
}

#[tokio::test]
async fn every_route_refuses_a_foreign_host() {
    // DNS rebinding: a page whose name now points here must read nothing, not only from /mcp.
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, true).await;
    let base = inst.url.trim_end_matches("/mcp").to_string();
    for path in [
        "/metrics",
        "/readyz",
        "/healthz",
        "/.well-known/oauth-protected-resource",
    ] {
        let url = format!("{base}{path}");
        let foreign = reqwest::Client::new()
            .get(&url)
            .header("host", "evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403, "{path} answered a foreign Host");
        let local = reqwest::Client::new().get(&url).send().await.unwrap();
        assert_ne!(local.status(), 403, "{path} refused its own host");
    }
}
