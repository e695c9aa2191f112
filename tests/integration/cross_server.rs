//! The red-team scenario of issue 20, as an attacker ran it: one token (`u7`, session `s7`), two
//! servers. `crm.search_accounts` returns confidential rows; `template.notify_team` must then be
//! refused for that session (on every instance), and nothing reaches the webhook. The ratchet is
//! the session's across the servers of a trust domain; both stores.

use super::procs::{Deployment, Store, call, client, notify};
use serde_json::json;
use std::process::Stdio;

async fn leak_is_refused(store: Store) {
    let mut dep = Deployment::new(store, "xserver").await;
    dep.set_env(
        "CRM_DATABASE_URL",
        &super::postgres_tool::crm_database("xserver").await,
    );
    let crm = dep.try_start_server("crm", "proxied", None).unwrap();
    let template = dep.start("full", None);

    // Control: another session's message goes out.
    let other = client(&template.url, "u8", "s8").await;
    let r = call(&other, "notify_team", notify("control"))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text);

    let c = client(&crm.url, "u7", "s7").await;
    let rows = call(&c, "search_accounts", json!({"query": "Acme"}))
        .await
        .unwrap();
    assert!(
        !rows.is_error && rows.text.contains("Acme Corp"),
        "{}",
        rows.text
    );
    assert_eq!(rows.level, "confidential");
    let t = client(&template.url, "u7", "s7").await;
    let r = call(
        &t,
        "notify_team",
        notify(&format!("exfiltrated {}", rows.text)),
    )
    .await
    .unwrap();
    assert!(
        r.is_error && r.text.starts_with("[FATAL]"),
        "{store:?}: {}",
        r.text
    );
    // Even a plain read on the networked instance is refused: the session needs `proxied`.
    let r = call(&t, "read_file", json!({"path": "/workspace/x"}))
        .await
        .unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(dep.webhook.delivered("control").len() == 1);
    assert!(
        dep.webhook.delivered("exfiltrated").is_empty(),
        "{store:?}: the rows reached the webhook"
    );
    for c in [c, t, other] {
        let _ = c.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_private_load_on_one_server_blocks_connect_on_another() {
    leak_is_refused(Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_private_load_on_one_server_blocks_connect_on_another() {
    leak_is_refused(Store::Postgres).await;
}

/// A desktop client with two servers, each through its own `bulkhead connect`: after crm's
/// confidential search, template's connect tool is refused and template's bridge moves to its
/// proxied instance (read from the refusal's `_meta`), one way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_desktop_bridges_follow_one_session_level() {
    use rmcp::ServiceExt;
    let mut dep = Deployment::new(Store::Sqlite, "xdesk").await;
    dep.set_env(
        "CRM_DATABASE_URL",
        &super::postgres_tool::crm_database("xserver").await,
    );
    let crm = dep.try_start_server("crm", "proxied", None).unwrap();
    let crm_full = dep.try_start_server("crm", "full", None).unwrap();
    let full = dep.start("full", None);
    let proxied = dep.start("proxied", None);
    let token = super::harness::token("u7", "desk");
    let config = dep.path().join("config.yaml");
    let (_c1, io1) = bridge(&config, &token, "crm", &crm_full.url, &crm.url);
    let (_c2, io2) = bridge(&config, &token, "template", &full.url, &proxied.url);
    let crm_c = ().serve(io1).await.unwrap();
    let tpl_c = ().serve(io2).await.unwrap();
    let (err, text) = bridge_call(
        &tpl_c,
        "write_file",
        json!({"path": "/workspace/n.txt", "content": "before"}),
    )
    .await;
    assert!(!err, "{text}");
    let (err, text) = bridge_call(&crm_c, "search_accounts", json!({"query": "Acme"})).await;
    assert!(!err && text.contains("Acme Corp"), "{text}");
    let (err, text) = bridge_call(&tpl_c, "notify_team", notify("after the load")).await;
    assert!(err && text.starts_with("[FATAL]"), "{text}");
    // The template bridge followed the session to the proxied instance: earlier files read there.
    let (err, text) = bridge_call(&tpl_c, "read_file", json!({"path": "/workspace/n.txt"})).await;
    assert!(!err && text.contains("before"), "{text}");
    assert!(dep.webhook.delivered("after the load").is_empty());
    let _ = crm_c.cancel().await;
    let _ = tpl_c.cancel().await;
}

/// One call through a bridge: (is_error, text).
async fn bridge_call(
    c: &super::procs::Client,
    tool: &str,
    args: serde_json::Value,
) -> (bool, String) {
    let r = super::procs::call_within(c, tool, args, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    (r.is_error, r.text)
}

/// A desktop client gets the surface an HTTP client gets: `bulkhead connect` lists and reads
/// resources (routed like tool calls: the confidential record moves the bridge to the proxied
/// instance, named by the refusal's `data`) and lists and renders prompts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktop_bridge_serves_resources_and_prompts() {
    use rmcp::ServiceExt;
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
    let dep = Deployment::new(Store::Sqlite, "xres").await;
    let full = dep.start("full", None);
    let proxied = dep.start("proxied", None);
    let token = super::harness::token("u9", "desk-res");
    let config = dep.path().join("config.yaml");
    let (_child, io) = bridge(&config, &token, "template", &full.url, &proxied.url);
    let c = ().serve(io).await.unwrap();
    let resources = within(c.list_all_resources()).await.unwrap();
    assert!(
        resources.iter().any(|r| r.uri == "docs://template/guide"),
        "{resources:?}"
    );
    let templates = within(c.list_all_resource_templates()).await.unwrap();
    assert!(
        templates.iter().any(|t| t.uri_template == "records://{id}"),
        "{templates:?}"
    );
    let guide = within(c.read_resource(ReadResourceRequestParams::new("docs://template/guide")))
        .await
        .unwrap();
    assert!(
        format!("{guide:?}").contains("Template server"),
        "{guide:?}"
    );
    // Confidential: the full instance refuses, the bridge moves to the proxied one and reads it.
    let record = within(c.read_resource(ReadResourceRequestParams::new("records://1")))
        .await
        .unwrap();
    assert!(format!("{record:?}").contains("confidential"), "{record:?}");
    let prompts = within(c.list_all_prompts()).await.unwrap();
    assert!(
        prompts.iter().any(|p| p.name == "find_customer"),
        "{prompts:?}"
    );
    let mut params = GetPromptRequestParams::new("find_customer");
    params.arguments = Some(json!({"customer": "Acme"}).as_object().cloned().unwrap());
    let prompt = within(c.get_prompt(params)).await.unwrap();
    assert!(format!("{prompt:?}").contains("Acme"), "{prompt:?}");
    let _ = c.cancel().await;
}

/// `f`, which must finish within 30 s.
async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), f)
        .await
        .expect("answered within 30 s")
}

/// `bulkhead connect <server>` over stdio with a full and a proxied instance and `token`: the
/// child (killed on drop) and its (stdout, stdin) for an rmcp client.
fn bridge(
    config: &std::path::Path,
    token: &str,
    server: &str,
    full: &str,
    proxied: &str,
) -> (
    tokio::process::Child,
    (tokio::process::ChildStdout, tokio::process::ChildStdin),
) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bulkhead"))
        .arg("--config")
        .arg(config)
        .args(["connect", server, "--url", full, "--url-proxied", proxied])
        .env("BULKHEAD_TOKEN", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    (child, io)
}
