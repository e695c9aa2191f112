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

/// One POST to `url`: the status, the content type, and every JSON-RPC message of the answer in
/// order (each `data:` event of an SSE answer, or the one JSON body).
async fn send(
    url: &str,
    tok: &str,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, Vec<Value>) {
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
    let messages = if kind.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&text).into_iter().collect()
    };
    (status, kind, messages)
}

/// One POST to `url`; the status, content type and the JSON-RPC message in the answer (the last
/// message with an id), or `Null`.
async fn post(url: &str, tok: &str, session: Option<&str>, body: &Value) -> (u16, String, Value) {
    let (status, kind, messages) = send(url, tok, session, body).await;
    let message = messages
        .into_iter()
        .rfind(|m| m.get("id").is_some())
        .unwrap_or(Value::Null);
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

/// One POST that must be answered 200: every JSON-RPC message of the answer, in order.
async fn post_all(url: &str, tok: &str, session: Option<&str>, body: &Value) -> Vec<Value> {
    let (status, _, messages) = send(url, tok, session, body).await;
    assert_eq!(status, 200, "{messages:?}");
    messages
}

/// The `notifications/message` events of a session's standalone stream (GET), read by a task
/// until the stream ends or the receiver is dropped.
async fn session_messages(url: &str, tok: &str, sid: &str) -> tokio::sync::mpsc::Receiver<Value> {
    use futures::StreamExt as _;
    let resp = reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid)
        .bearer_auth(tok)
        .send()
        .await
        .expect("GET stream");
    assert_eq!(resp.status().as_u16(), 200);
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find('\n') {
                let line: String = buf.drain(..=end).collect();
                if let Some(data) = line.trim_end().strip_prefix("data:")
                    && let Ok(m) = serde_json::from_str::<Value>(data.trim())
                    && m["method"] == "notifications/message"
                    && tx.send(m).await.is_err()
                {
                    return;
                }
            }
        }
    });
    rx
}

/// A call that warns (a log search over a folder with a link leading out of it) brings the
/// caller the same warning on the direct path and on rmcp's, in both modes: the decision and
/// the payload have one home (`serve::notify`). Stateless, the answers are the same messages in
/// the same order. Stateful, the direct path sends the warning in the call's own stream, and
/// rmcp on the session's stream (it routes a notification to a request's stream only for
/// progress and cancellation). Progress needs a `progressToken` in `_meta`, and every call with
/// `_meta` is rmcp's: progress has one path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_reach_the_caller_the_same_way_on_both_paths() {
    for stateful in [false, true] {
        let d = crate::procs::Deployment::new(crate::procs::Store::Sqlite, "direct-warnings").await;
        if !stateful {
            d.set_stateless();
        }
        let outside = d.path().join("outside.log");
        std::fs::write(&outside, "2026-11-22T08:00:00Z ERROR outside\n").unwrap();
        std::os::unix::fs::symlink(&outside, d.path().join("logs/zz-link.log")).unwrap();
        let proc = d.start("full", None);
        let tok = token("alice", "direct-warn");
        let sid = if stateful {
            Some(open_session(&proc.url, &tok).await)
        } else {
            None
        };
        let mut on_session = match &sid {
            Some(sid) => Some(session_messages(&proc.url, &tok, sid).await),
            None => None,
        };
        let args = json!({"pattern": "INFO"});
        let direct = post_all(
            &proc.url,
            &tok,
            sid.as_deref(),
            &call(7, "search_logs", args.clone(), false),
        )
        .await;
        let mut routed = post_all(
            &proc.url,
            &tok,
            sid.as_deref(),
            &call(7, "search_logs", args, true),
        )
        .await;
        let warnings: Vec<&Value> = direct
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .collect();
        assert_eq!(warnings.len(), 1, "stateful={stateful}: {direct:?}");
        assert_eq!(warnings[0]["params"]["level"], "warning");
        assert_eq!(warnings[0]["params"]["data"]["tool"], "search_logs");
        assert!(
            warnings[0]["params"]["data"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("zz-link.log")),
            "{direct:?}"
        );
        assert!(direct.last().is_some_and(|m| m.get("result").is_some()));
        if let Some(rx) = on_session.as_mut() {
            let warning = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .ok()
                .flatten()
                .expect("rmcp sends the warning on the session's stream");
            routed.insert(0, warning);
        }
        assert_eq!(
            direct, routed,
            "stateful={stateful}: direct and rmcp answers differ"
        );
    }
}
