//! The template's tools through the official rmcp client over an in-memory duplex transport.

use bulkhead::identity::Identity;
use bulkhead::policy::NetworkMode;
use bulkhead::serve::handler::McpServer;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::sync::Arc;

async fn connect(
    dir: &std::path::Path,
    mode: NetworkMode,
    user: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let config = crate::harness::config(dir, true);
    let rt = Arc::new(
        bulkhead::serve::runtime(
            &bulkhead_example::servers::PROJECT,
            &config,
            "template",
            mode,
        )
        .await
        .unwrap(),
    );
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    let server = McpServer::stdio(rt, Identity::new(user, "mem-1").unwrap());
    tokio::spawn(async move {
        if let Ok(s) = server.serve(server_end).await {
            let _ = s.waiting().await;
        }
    });
    ().serve(client_end).await.unwrap()
}

async fn call(
    c: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, String, Value) {
    let r = c
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .unwrap();
    let text = r
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<String>();
    (
        r.is_error.unwrap_or(false),
        text,
        serde_json::to_value(&r.meta).unwrap(),
    )
}

#[tokio::test]
async fn template_tools_keep_their_promises_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let c = connect(dir.path(), NetworkMode::Proxied, "dora").await;
    let tools = c.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 9);
    for t in &tools {
        let meta = serde_json::to_value(&t.meta).unwrap();
        assert!(
            meta["bulkhead/permission"].is_string() && meta["bulkhead/sensitivity"].is_string(),
            "{}: {meta}",
            t.name
        );
    }
    // read / write in the caller's workspace
    assert!(
        !call(
            &c,
            "write_file",
            json!({"path": "/workspace/x.md", "content": "# x"})
        )
        .await
        .0
    );
    assert_eq!(
        call(&c, "read_file", json!({"path": "x.md"})).await.1,
        "# x"
    );
    // retryable: bad arguments name the field and carry no [FATAL]
    let (err, text, _) = call(&c, "search_records", json!({"query": ""})).await;
    assert!(
        err && text.contains("`query`") && !text.starts_with("[FATAL]"),
        "{text}"
    );
    // escape attempts fail
    let (err, _, _) = call(&c, "read_file", json!({"path": "/etc/passwd"})).await;
    assert!(err);
    // sensitive load raises the session; `_meta` says so
    let (err, text, meta) = call(
        &c,
        "load_sensitive_dataset",
        json!({"dataset_name": "payroll"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(meta["bulkhead/sensitivity"], "confidential");
    assert_eq!(meta["bulkhead/required_mode"], "proxied");
    // connect tool refused afterwards, fatal
    let (err, text, _) = call(
        &c,
        "notify_team",
        json!({"channel": "ops", "message": "hi"}),
    )
    .await;
    assert!(err && text.starts_with("[FATAL] "), "{text}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_refusal_says_which_instance_the_call_needs() {
    let dir = tempfile::tempdir().unwrap();
    let c = connect(dir.path(), NetworkMode::Full, "erin").await;
    let (err, text, meta) = call(
        &c,
        "load_sensitive_dataset",
        json!({"dataset_name": "payroll"}),
    )
    .await;
    assert!(err && text.starts_with("[FATAL] "), "{text}");
    assert_eq!(meta["bulkhead/sensitivity"], "public", "nothing was raised");
    assert_eq!(
        meta["bulkhead/required_mode"], "proxied",
        "the client learns where to go without parsing text"
    );
    let (err, _, meta) = call(&c, "read_file", json!({"path": "/workspace/none.txt"})).await;
    assert!(err);
    assert_eq!(meta["bulkhead/required_mode"], "full");
    c.cancel().await.unwrap();
}
