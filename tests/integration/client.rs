//! The client library against real instances of the template server (full, proxied, none) on
//! loopback with real tokens. Each instance's router is wrapped in a recorder that notes every
//! `tools/call` it receives, so routing is proven by where requests arrived, not by the client's
//! own account.

use crate::harness::{config, token};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bulkhead::auth::Verifier;
use bulkhead::client::{ClientError, McpClient, StrictClient, get_mcp_client};
use bulkhead::config::{Config, McpServerEntry};
use bulkhead::policy::{NetworkMode, Sensitivity};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Arrival order across all instances of a test process.
static ARRIVAL: AtomicUsize = AtomicUsize::new(0);

/// What one instance received.
#[derive(Default)]
struct Recorder {
    /// (arrival number, tool name) of every `tools/call`.
    calls: Mutex<Vec<(usize, String)>>,
    initializes: AtomicUsize,
    deletes_ok: AtomicUsize,
    sessions: Mutex<Vec<String>>,
}

impl Recorder {
    fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.1.clone())
            .collect()
    }

    fn arrivals(&self) -> Vec<(usize, String)> {
        self.calls.lock().unwrap().clone()
    }
}

async fn record(State(rec): State<Arc<Recorder>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
        match v["method"].as_str() {
            Some("tools/call") => rec.calls.lock().unwrap().push((
                ARRIVAL.fetch_add(1, Ordering::SeqCst),
                v["params"]["name"].as_str().unwrap_or("?").to_string(),
            )),
            Some("initialize") => {
                rec.initializes.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
    }
    let deleting = parts.method == axum::http::Method::DELETE;
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if deleting && resp.status().is_success() {
        rec.deletes_ok.fetch_add(1, Ordering::SeqCst);
    }
    if let Some(sid) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        rec.sessions.lock().unwrap().push(sid.to_string());
    }
    resp
}

/// A recorded instance of `template`.
struct Recorded {
    url: String,
    rec: Arc<Recorder>,
    stop: CancellationToken,
}

impl Drop for Recorded {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(dir: &tempfile::TempDir, mode: NetworkMode) -> Recorded {
    let config = config(dir.path(), true);
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let rec = Arc::new(Recorder::default());
    let app = bulkhead::serve::http::router(
        rt,
        Verifier::new(&config.auth).unwrap(),
        &config.auth.issuer,
        &config.http,
        &base,
        stop.clone(),
    )
    .layer(axum::middleware::from_fn_with_state(rec.clone(), record));
    tokio::spawn(bulkhead::serve::http::serve(listener, app, stop.clone()));
    Recorded {
        url: format!("{base}/mcp"),
        rec,
        stop,
    }
}

/// Full, proxied and none instances sharing one state directory.
async fn three(dir: &tempfile::TempDir) -> [Recorded; 3] {
    [
        start(dir, NetworkMode::Full).await,
        start(dir, NetworkMode::Proxied).await,
        start(dir, NetworkMode::None).await,
    ]
}

fn client_config(dir: &tempfile::TempDir, entry: McpServerEntry) -> Config {
    let mut c = config(dir.path(), true);
    c.mcp_servers.insert("template".into(), entry);
    c
}

fn entry(
    url: &str,
    proxied: Option<&str>,
    isolated: Option<&str>,
    trusted: bool,
) -> McpServerEntry {
    McpServerEntry {
        kind: "client".into(),
        url: url.into(),
        url_proxied: proxied.map(str::to_string),
        url_isolated: isolated.map(str::to_string),
        read_timeout: 30,
        trusted,
    }
}

async fn isolating(dir: &tempfile::TempDir, i: &[Recorded; 3], tok: &str) -> McpClient {
    let c = client_config(
        dir,
        entry(&i[0].url, Some(&i[1].url), Some(&i[2].url), true),
    );
    let client = get_mcp_client("template", &c, tok)
        .await
        .expect("client opens");
    assert!(matches!(client, McpClient::Isolating(_)));
    client
}

fn write(i: usize) -> Value {
    json!({"path": format!("/workspace/f{i}.txt"), "content": format!("content {i}")})
}

fn read(i: usize) -> Value {
    json!({"path": format!("/workspace/f{i}.txt")})
}

#[tokio::test]
async fn after_a_sensitive_load_calls_go_to_the_proxied_instance_and_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let i = three(&dir).await;
    let c = isolating(&dir, &i, &token("alice", "s1")).await;
    assert_eq!(c.current_mode(), NetworkMode::Full);
    let r = c.call_tool("write_file", write(0)).await.unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(
        (r.mode, r.level),
        (NetworkMode::Full, Some(Sensitivity::Internal))
    );
    let r = c
        .call_tool(
            "load_sensitive_dataset",
            json!({"dataset_name": "customers"}),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(
        (r.mode, r.level),
        (NetworkMode::Proxied, Some(Sensitivity::Confidential))
    );
    for _ in 0..3 {
        let r = c.call_tool("read_file", read(0)).await.unwrap();
        assert_eq!((r.is_error, r.text.as_str()), (false, "content 0"));
        assert_eq!(r.mode, NetworkMode::Proxied);
    }
    assert_eq!(c.current_mode(), NetworkMode::Proxied);
    // Where the requests really arrived.
    assert_eq!(i[0].rec.calls(), ["write_file"]);
    assert_eq!(
        i[1].rec.calls(),
        [
            "load_sensitive_dataset",
            "read_file",
            "read_file",
            "read_file"
        ]
    );
    assert!(i[2].rec.calls().is_empty());
    // The session now holds private data: the trusted server's connect refusal aborts the run.
    match c
        .call_tool("notify_team", json!({"channel": "ops", "message": "hi"}))
        .await
    {
        Err(ClientError::Fatal(m)) => assert!(m.contains("connect tools stay blocked"), "{m}"),
        other => panic!("expected a fatal error, got {other:?}"),
    }
    assert_eq!(
        i[0].rec.calls(),
        ["write_file"],
        "nothing went back to full"
    );
    c.close().await;
    for inst in &i {
        assert_eq!(
            inst.rec.deletes_ok.load(Ordering::SeqCst),
            1,
            "every session closed"
        );
    }
    assert!(matches!(
        c.call_tool("read_file", read(0)).await,
        Err(ClientError::Closed)
    ));
}

#[tokio::test]
async fn a_confidential_tool_called_first_goes_straight_to_the_proxied_instance() {
    let dir = tempfile::tempdir().unwrap();
    let i = three(&dir).await;
    let c = isolating(&dir, &i, &token("bob", "s1")).await;
    // No result has told the client anything yet: only the tool's declared level routes it.
    let r = c
        .call_tool("load_sensitive_dataset", json!({"dataset_name": "leads"}))
        .await
        .unwrap();
    assert_eq!(
        (r.is_error, r.mode),
        (false, NetworkMode::Proxied),
        "{}",
        r.text
    );
    let r = c.call_tool("write_file", write(1)).await.unwrap();
    assert_eq!(
        (r.is_error, r.mode),
        (false, NetworkMode::Proxied),
        "{}",
        r.text
    );
    assert!(
        i[0].rec.calls().is_empty(),
        "full saw {:?}",
        i[0].rec.calls()
    );
    assert_eq!(i[1].rec.calls(), ["load_sensitive_dataset", "write_file"]);
    c.close().await;
}

#[tokio::test]
async fn a_refusal_moves_the_client_when_the_session_escalated_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let i = three(&dir).await;
    let tok = token("carol", "s1");
    let c = isolating(&dir, &i, &tok).await;
    assert_eq!(
        c.call_tool("write_file", write(2)).await.unwrap().mode,
        NetworkMode::Full
    );
    // Another agent of the same session loads private data through the proxied instance.
    let other = StrictClient::connect(&i[1].url, &tok, NetworkMode::Proxied, 30, true)
        .await
        .unwrap();
    let r = other
        .call_tool("load_sensitive_dataset", json!({"dataset_name": "payroll"}))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    other.close().await;
    // The client still believes in full; full refuses, the client retries once on proxied.
    let r = c.call_tool("read_file", read(2)).await.unwrap();
    assert_eq!((r.is_error, r.text.as_str()), (false, "content 2"));
    assert_eq!(
        (r.mode, r.level),
        (NetworkMode::Proxied, Some(Sensitivity::Confidential))
    );
    assert_eq!(c.current_mode(), NetworkMode::Proxied);
    let r = c.call_tool("read_file", read(2)).await.unwrap();
    assert_eq!(r.mode, NetworkMode::Proxied);
    assert_eq!(i[0].rec.calls(), ["write_file", "read_file"]);
    assert_eq!(
        i[1].rec.calls(),
        ["load_sensitive_dataset", "read_file", "read_file"]
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_tasks_never_route_back_during_an_escalation() {
    let dir = tempfile::tempdir().unwrap();
    let i = three(&dir).await;
    let c = Arc::new(isolating(&dir, &i, &token("dave", "s1")).await);
    let escalated = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..16usize {
        let (c, escalated) = (c.clone(), escalated.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for round in 0..6 {
                if t == 0 && round == 2 {
                    let r = c
                        .call_tool("load_sensitive_dataset", json!({"dataset_name": "hr"}))
                        .await
                        .unwrap();
                    assert!(!r.is_error, "{}", r.text);
                    escalated.store(true, Ordering::SeqCst);
                }
                let after = escalated.load(Ordering::SeqCst);
                let w = c.call_tool("write_file", write(t)).await.unwrap();
                let r = c.call_tool("read_file", read(t)).await.unwrap();
                for reply in [&w, &r] {
                    assert!(!reply.is_error, "task {t} round {round}: {}", reply.text);
                    if after {
                        assert_eq!(reply.mode, NetworkMode::Proxied, "task {t} round {round}");
                    }
                    seen.push(reply.mode);
                }
                assert_eq!(r.text, format!("content {t}"));
            }
            assert!(
                seen.windows(2).all(|w| w[0] <= w[1]),
                "task {t} went back: {seen:?}"
            );
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(c.current_mode(), NetworkMode::Proxied);
    // Each task has at most one call in flight when the floor rises (task 0 is the one raising
    // it), so at most 15 calls may still reach full after the load reached proxied; a client
    // that routed back would send many more.
    let load_at = i[1]
        .rec
        .arrivals()
        .iter()
        .find(|c| c.1 == "load_sensitive_dataset")
        .map(|c| c.0)
        .unwrap();
    let late = i[0].rec.arrivals().iter().filter(|c| c.0 > load_at).count();
    assert!(late <= 15, "{late} calls reached full after the escalation");
    let full_before = i[0].rec.calls().len();
    let proxied_before = i[1].rec.calls().len();
    for t in 0..16 {
        c.call_tool("read_file", read(t)).await.unwrap();
    }
    assert_eq!(
        i[0].rec.calls().len(),
        full_before,
        "nothing more reached full"
    );
    assert_eq!(i[1].rec.calls().len(), proxied_before + 16);
    assert!(i[2].rec.calls().is_empty());
    c.close().await;
}

#[tokio::test]
async fn fatal_results_abort_only_when_the_server_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let full = start(&dir, NetworkMode::Full).await;
    let tok = token("erin", "s1");
    let load = json!({"dataset_name": "customers"});
    // The full instance refuses a confidential load with a `[FATAL] ` result.
    let untrusted = get_mcp_client(
        "template",
        &client_config(&dir, entry(&full.url, None, None, false)),
        &tok,
    )
    .await
    .unwrap();
    assert!(matches!(untrusted, McpClient::Strict(_)));
    let r = untrusted
        .call_tool("load_sensitive_dataset", load.clone())
        .await
        .expect("an untrusted fatal is an ordinary error");
    assert!(r.is_error && r.text.starts_with("[FATAL] "), "{}", r.text);
    let trusted = get_mcp_client(
        "template",
        &client_config(&dir, entry(&full.url, None, None, true)),
        &tok,
    )
    .await
    .unwrap();
    match trusted.call_tool("load_sensitive_dataset", load).await {
        Err(ClientError::Fatal(m)) => {
            assert!(
                !m.starts_with("[FATAL]") && m.contains("url_proxied"),
                "{m}"
            )
        }
        other => panic!("expected a fatal error, got {other:?}"),
    }
    // A retryable error from a trusted server stays a reply.
    let r = trusted.call_tool("read_file", json!({})).await.unwrap();
    assert!(
        r.is_error && r.text.contains("`path` is required"),
        "{}",
        r.text
    );
    untrusted.close().await;
    trusted.close().await;
}

#[tokio::test]
async fn a_failing_start_closes_what_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let full = start(&dir, NetworkMode::Full).await;
    let proxied = start(&dir, NetworkMode::Proxied).await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", l.local_addr().unwrap())
    };
    let tok = token("frank", "s1");
    let c = client_config(
        &dir,
        entry(&full.url, Some(&proxied.url), Some(&closed), true),
    );
    match get_mcp_client("template", &c, &tok).await {
        Err(ClientError::Connect { url, .. }) => assert_eq!(url, closed),
        Err(e) => panic!("expected a connect error, got {e}"),
        Ok(_) => panic!("expected a connect error, got a client"),
    }
    for inst in [&full, &proxied] {
        assert_eq!(
            inst.rec.initializes.load(Ordering::SeqCst),
            1,
            "it was opened"
        );
        assert_eq!(inst.rec.deletes_ok.load(Ordering::SeqCst), 1, "and closed");
        // The server no longer knows the session.
        let sid = inst.rec.sessions.lock().unwrap()[0].clone();
        let resp = reqwest::Client::new()
            .post(&inst.url)
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {tok}"))
            .header("mcp-session-id", sid)
            .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404);
    }
}

#[tokio::test]
async fn bad_entries_are_configuration_errors() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), true);
    let tok = token("gina", "s1");
    assert!(matches!(
        get_mcp_client("nope", &c, &tok).await,
        Err(ClientError::Config(_))
    ));
    let mut zero = entry("http://127.0.0.1:9/mcp", None, None, true);
    zero.read_timeout = 0;
    assert!(matches!(
        get_mcp_client("template", &client_config(&dir, zero), &tok).await,
        Err(ClientError::Config(_))
    ));
    let ftp = entry("ftp://127.0.0.1/mcp", None, None, true);
    assert!(matches!(
        get_mcp_client("template", &client_config(&dir, ftp), &tok).await,
        Err(ClientError::Config(_))
    ));
}

/// A server whose only tool answers after 30 s.
#[derive(Clone)]
struct Slow;

impl rmcp::ServerHandler for Slow {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn call_tool(
        &self,
        _request: rmcp::model::CallToolRequestParams,
        _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        Ok(rmcp::model::CallToolResult::success(vec![]).into())
    }
}

#[tokio::test]
async fn a_call_is_bounded_by_read_timeout() {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let stop = CancellationToken::new();
    let mut cfg = StreamableHttpServerConfig::default();
    cfg.cancellation_token = stop.clone();
    let service =
        StreamableHttpService::new(|| Ok(Slow), Arc::new(LocalSessionManager::default()), cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(bulkhead::serve::http::serve(listener, app, stop.clone()));
    let c = StrictClient::connect(&url, "unused", NetworkMode::Full, 1, true)
        .await
        .unwrap();
    match c.call_tool("slow", json!({})).await {
        Err(ClientError::Timeout { url: u, seconds }) => assert_eq!((u, seconds), (url, 1)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    c.close().await;
    stop.cancel();
}

/// A server that declares `{count: integer}` for its tool and returns a string count.
#[derive(Clone)]
struct Liar;

impl rmcp::ServerHandler for Liar {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let object = |v: Value| Arc::new(v.as_object().unwrap().clone());
        let mut tool = rmcp::model::Tool::new(
            "counted",
            "declares an integer count",
            object(json!({"type": "object"})),
        );
        tool.output_schema = Some(object(json!({
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"]
        })));
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        _ctx: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let honest = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("honest"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let count = if honest { json!(3) } else { json!("three") };
        Ok(rmcp::model::CallToolResult::structured(json!({"count": count})).into())
    }
}

#[tokio::test]
async fn a_result_that_contradicts_its_output_schema_is_an_error() {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let stop = CancellationToken::new();
    let mut cfg = StreamableHttpServerConfig::default();
    cfg.cancellation_token = stop.clone();
    let service =
        StreamableHttpService::new(|| Ok(Liar), Arc::new(LocalSessionManager::default()), cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(bulkhead::serve::http::serve(listener, app, stop.clone()));
    let c = StrictClient::connect(&url, "unused", NetworkMode::Full, 5, true)
        .await
        .unwrap();
    let ok = c
        .call_tool("counted", json!({"honest": true}))
        .await
        .unwrap();
    assert_eq!(ok.structured, Some(json!({"count": 3})));
    match c.call_tool("counted", json!({"honest": false})).await {
        Err(ClientError::Schema { tool, problem }) => {
            assert_eq!(tool, "counted");
            assert!(problem.contains("/count"), "{problem}");
        }
        other => panic!("expected a schema error, got {other:?}"),
    }
    c.close().await;
    stop.cancel();
}

#[tokio::test]
async fn every_server_of_a_session_moves_when_one_of_them_reports_a_higher_level() {
    // Two servers' clients in one agent process, one session: a load through one of them moves
    // the other to its proxied instance before its next call (no refusal needed first).
    let dir = tempfile::tempdir().unwrap();
    let i = three(&dir).await;
    let tok = token("alice", "two-servers");
    let a = isolating(&dir, &i, &tok).await;
    let b = isolating(&dir, &i, &tok).await;
    let other = isolating(&dir, &i, &token("bob", "elsewhere")).await;
    let r = a
        .call_tool(
            "load_sensitive_dataset",
            json!({"dataset_name": "customers"}),
        )
        .await
        .unwrap();
    assert_eq!(r.level, Some(Sensitivity::Confidential), "{}", r.text);
    assert_eq!(b.current_mode(), NetworkMode::Proxied);
    assert_eq!(
        other.current_mode(),
        NetworkMode::Full,
        "another session moved"
    );
    let full_calls = i[0].rec.calls().len();
    let r = b.call_tool("write_file", write(7)).await.unwrap();
    assert_eq!(r.mode, NetworkMode::Proxied, "{}", r.text);
    assert_eq!(
        i[0].rec.calls().len(),
        full_calls,
        "the full instance was asked first"
    );
    for c in [a, b, other] {
        c.close().await;
    }
}
