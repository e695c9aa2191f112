//! Tool calls answered by the direct path (`serve::direct`) against the same calls answered by
//! rmcp (a `_meta` in the params sends a call there): the same JSON-RPC answer in both modes, a
//! session kept open by calls alone, and a direct call cancelled by `notifications/cancelled`.

use crate::harness::{SECRET, start, start_with, token};
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ACCEPT: &str = "application/json, text/event-stream";

/// One POST to `url`; the status, content type and the JSON-RPC message in the answer (the last
/// `data:` event of an SSE answer), or `Null`.
async fn post(url: &str, tok: &str, session: Option<&str>, body: &Value) -> (u16, String, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .bearer_auth(tok)
        .json(body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = resp.text().await.unwrap_or_default();
    let message = if kind.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .filter(|m| m.get("id").is_some())
            .last()
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    (status, kind, message)
}

/// Opens a transport session (stateful) and returns its id.
async fn open_session(url: &str, tok: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = reqwest::Client::new()
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .bearer_auth(tok)
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let sid = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let (status, _, _) = post(
        url,
        tok,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202);
    sid
}

/// A template instance (stateful or not), a token of `user`/`session`, and on a stateful
/// instance an open transport session.
async fn instance(
    stateful: bool,
    user: &str,
    session: &str,
) -> (crate::harness::Instance, String, Option<String>) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let inst = start(dir, NetworkMode::Full, stateful).await;
    let tok = token(user, session);
    let sid = if stateful {
        Some(open_session(&inst.url, &tok).await)
    } else {
        None
    };
    (inst, tok, sid)
}

fn call(id: u64, name: &str, arguments: Value, via_rmcp: bool) -> Value {
    let mut params = json!({"name": name, "arguments": arguments});
    if via_rmcp {
        params["_meta"] = json!({});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_direct_answer_is_rmcps_answer_in_both_modes() {
    for stateful in [true, false] {
        let (inst, tok, sid) = instance(stateful, "alice", "direct-1").await;
        let cases = [
            (
                "write_file",
                json!({"path": "/workspace/a.txt", "content": "hello"}),
            ),
            ("read_file", json!({"path": "/workspace/a.txt"})),
            ("read_file", json!({"path": "/etc/passwd"})),
            ("read_file", json!({"path": 5})),
            ("read_file", json!({})),
            ("no_such_tool", json!({})),
            ("search_records", json!({"query": "x"})),
        ];
        for (n, (name, args)) in cases.iter().enumerate() {
            let id = 10 + n as u64;
            let direct = post(
                &inst.url,
                &tok,
                sid.as_deref(),
                &call(id, name, args.clone(), false),
            )
            .await;
            let routed = post(
                &inst.url,
                &tok,
                sid.as_deref(),
                &call(id, name, args.clone(), true),
            )
            .await;
            assert_eq!(direct.0, 200, "{name} {args}: {direct:?}");
            assert_eq!(routed.0, 200, "{name} {args}: {routed:?}");
            if stateful {
                // rmcp answers a session's request on an SSE stream; the direct path with JSON.
                assert!(direct.1.starts_with("application/json"), "{direct:?}");
                assert!(routed.1.starts_with("text/event-stream"), "{routed:?}");
            }
            assert!(
                direct.2.get("result").is_some() || direct.2.get("error").is_some(),
                "{direct:?}"
            );
            assert_eq!(
                direct.2, routed.2,
                "stateful={stateful} {name} {args}: direct and rmcp answers differ"
            );
        }
    }
}

/// A stateful config with `extra` lines under `http:`.
fn config_with(dir: &std::path::Path, extra: &str) -> Config {
    let d = dir.display().to_string();
    let text = format!(
        "auth:\n  issuer: test-issuer\n  audience: bulkhead-test\n  keys:\n    - {{ kid: dev, alg: HS256, secret: {SECRET} }}\nhttp:\n  allowed_hosts: [localhost, 127.0.0.1]\n  stateful: true\n{extra}state:\n  dir: {d}/state\n  workspaces: {d}/workspaces\n"
    );
    Config::parse(&text, "test", &|_| None).expect("test config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_only_calls_tools_outlives_the_idle_timeout_and_ends_when_idle() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let config = config_with(dir.path(), "  session_idle_timeout_s: 2\n");
    let inst = start_with(config, dir, NetworkMode::Full).await;
    let tok = token("ana", "idle-1");
    let sid = open_session(&inst.url, &tok).await;
    // Three idle timeouts of calls only (answered by the direct path, never seen by rmcp); a
    // call every 200 ms leaves ten times the gap's margin before the 2 s timeout.
    let until = Instant::now() + Duration::from_secs(6);
    let mut n = 0;
    while Instant::now() < until {
        let (status, kind, msg) = post(
            &inst.url,
            &tok,
            Some(&sid),
            &call(
                100 + n,
                "read_file",
                json!({"path": "/workspace/none.txt"}),
                false,
            ),
        )
        .await;
        assert_eq!(status, 200, "call {n} after {:?}: {msg}", until.elapsed());
        assert!(kind.starts_with("application/json"), "{kind}");
        n += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Then idle: the session ends (bounded wait) and its id is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, _, _) = post(
            &inst.url,
            &tok,
            Some(&sid),
            &call(
                999,
                "read_file",
                json!({"path": "/workspace/none.txt"}),
                false,
            ),
        )
        .await;
        if status == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "an idle session stayed open");
        // Each probe uses the session again; leave it idle for longer than the timeout and a
        // check interval (2 s + 0.5 s).
        tokio::time::sleep(Duration::from_millis(3000)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_is_cancelled_by_notifications_cancelled() {
    for stateful in [true, false] {
        let (inst, tok, sid) = instance(stateful, "carol", "cancel-1").await;
        let started = Instant::now();
        let (url, t, s) = (inst.url.clone(), tok.clone(), sid.clone());
        let pending = tokio::spawn(async move {
            post(
                &url,
                &t,
                s.as_deref(),
                &call(
                    77,
                    "run_python",
                    json!({"code": "import time\ntime.sleep(25)\nprint('slept')"}),
                    false,
                ),
            )
            .await
        });
        // Cancel until the answer comes (the call may not be registered at the first try).
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 77, "reason": "test"}});
        while !pending.is_finished() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no answer to a cancelled call"
            );
            let (status, _, _) = post(&inst.url, &tok, sid.as_deref(), &cancel).await;
            assert_eq!(status, 202);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (status, _, message) = pending.await.unwrap();
        assert_eq!(status, 200);
        // Had it run to its end, the answer would be the script's output.
        assert_eq!(
            message["error"]["message"], "request cancelled",
            "stateful={stateful}: {message}"
        );
    }
}
