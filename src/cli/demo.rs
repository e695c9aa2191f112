//! `bulkhead demo`: the seeds' client scenarios against real local instances of `template`
//! (full and proxied, on loopback, sharing one compliance store), printed step by step.

use bulkhead::auth::Verifier;
use bulkhead::auth::mint::{MintClaims, mint_hs256};
use bulkhead::config::Config;
use bulkhead::policy::NetworkMode;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

type Client = RunningService<rmcp::RoleClient, ()>;

async fn start(
    config: &Config,
    mode: NetworkMode,
    stop: &CancellationToken,
) -> anyhow::Result<String> {
    let rt = Arc::new(bulkhead::serve::runtime(config, "template", mode)?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = bulkhead::serve::http::router(
        rt,
        Verifier::new(&config.auth)?,
        &config.auth.issuer,
        &config.http,
        &base,
        stop.clone(),
    );
    tokio::spawn(bulkhead::serve::http::serve(listener, app, stop.clone()));
    Ok(format!("{base}/mcp"))
}

async fn connect(url: &str, token: &str) -> anyhow::Result<Client> {
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string()),
    );
    Ok(().serve(t).await?)
}

async fn call(c: &Client, tool: &str, args: Value) -> anyhow::Result<(bool, String, String)> {
    let r = c
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await?;
    let text: String = r
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect();
    let level = r
        .meta
        .as_ref()
        .and_then(|m| m.0.get("bulkhead/sensitivity"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    Ok((r.is_error.unwrap_or(false), text, level))
}

fn show(step: &str, (err, text, level): &(bool, String, String)) {
    let verdict = match (err, text.starts_with("[FATAL] ")) {
        (false, _) => "ok",
        (true, false) => "retryable error (the model may fix its arguments and try again)",
        (true, true) => "fatal error (a strict client aborts the run)",
    };
    println!(
        "  {step}\n    → {verdict}; session level now: {level}\n    → {}",
        text.lines().next().unwrap_or("")
    );
}

/// Runs the scenarios; state goes to a temporary folder.
pub fn run(config: &Config) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut config = config.clone();
    config.state.dir = dir.path().join("state");
    config.state.workspaces = dir.path().join("workspaces");
    let key = config
        .auth
        .keys
        .iter()
        .find_map(|k| k.secret.clone())
        .ok_or_else(|| anyhow::anyhow!("the demo needs an HS256 dev key in auth.keys"))?;
    let claims = MintClaims {
        sub: "alice".into(),
        session_id: "demo-1".into(),
        iss: config.auth.issuer.clone(),
        aud: config.auth.audience.clone(),
        ttl_secs: 600,
    };
    let token = mint_hs256(key.as_bytes(), &claims)?;
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        let stop = CancellationToken::new();
        let full_url = start(&config, NetworkMode::Full, &stop).await?;
        let proxied_url = start(&config, NetworkMode::Proxied, &stop).await?;
        println!("Template server, two instances on loopback sharing one compliance store:");
        println!("  full network: {full_url}\n  proxied:      {proxied_url}\n  caller: alice / session demo-1 (a real HS256 token)\n");
        let full = connect(&full_url, &token).await?;
        let proxied = connect(&proxied_url, &token).await?;

        println!("1. A normal read: write a note, read it back (full instance).");
        show("write_file /workspace/notes.txt", &call(&full, "write_file", json!({"path": "/workspace/notes.txt", "content": "meeting at 10"})).await?);
        show("read_file /workspace/notes.txt", &call(&full, "read_file", json!({"path": "/workspace/notes.txt"})).await?);

        println!("\n2. A retryable error: search with an empty query. `search_records` is declared confidential");
        println!("   (its `_meta` in tools/list says so), so the client sends it to the proxied instance:");
        show("search_records query=\"\" on the proxied instance", &call(&proxied, "search_records", json!({"query": ""})).await?);

        println!("\n3. A sensitive load. The full instance will not take confidential data into a networked process:");
        show("load_sensitive_dataset on the full instance", &call(&full, "load_sensitive_dataset", json!({"dataset_name": "customers_2026"})).await?);
        println!("   so the client switches to the proxied instance (one-way) and loads it there:");
        show("load_sensitive_dataset on the proxied instance", &call(&proxied, "load_sensitive_dataset", json!({"dataset_name": "customers_2026"})).await?);

        println!("\n4. From now on:");
        show("notify_team (a connect tool) on the proxied instance", &call(&proxied, "notify_team", json!({"channel": "ops", "message": "customer list attached"})).await?);
        show("read_file on the full instance (a client that failed to switch)", &call(&full, "read_file", json!({"path": "/workspace/notes.txt"})).await?);
        show("read_file on the proxied instance (same workspace)", &call(&proxied, "read_file", json!({"path": "/workspace/notes.txt"})).await?);

        full.cancel().await?;
        proxied.cancel().await?;
        stop.cancel();
        println!("\nDone: every step above went through token auth, the workspace, the context preset and the ratchet.");
        Ok(())
    })
}
