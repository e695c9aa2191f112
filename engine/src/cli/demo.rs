//! `bulkhead demo`: the seeds' client scenarios against real local instances of `template`,
//! printed step by step. As root it runs on `bulkhead up` (network namespaces + nftables) and
//! also shows the kernel blocking an outbound call; elsewhere it runs the instances in-process.

use bulkhead::auth::Verifier;
use bulkhead::auth::mint::{MintClaims, mint_hs256};
use bulkhead::client::{ClientError, ToolReply, get_mcp_client};
use bulkhead::config::Config;
use bulkhead::isolation::up::{Running, UpOptions, namespaces_permitted, up};
use bulkhead::policy::NetworkMode;
use bulkhead::project::Project;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

type Client = RunningService<rmcp::RoleClient, ()>;

const WEBHOOK_PORT: u16 = 9099;

async fn start_in_process(
    project: &Project,
    config: &Config,
    mode: NetworkMode,
    stop: &CancellationToken,
) -> anyhow::Result<String> {
    let rt = Arc::new(bulkhead::serve::runtime(project, config, "template", mode).await?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let tokens = bulkhead::sessions::TokenService::from_config(config)?.map(Arc::new);
    let verifier = match &tokens {
        Some(t) => Verifier::with_session_key(&config.auth, t.key().public_jwk())?,
        None => Verifier::new(&config.auth)?,
    };
    let app = bulkhead::serve::http::router_with_tokens(
        rt,
        verifier,
        &config.auth.issuer,
        &config.http,
        &base,
        stop.clone(),
        tokens,
    );
    tokio::spawn(bulkhead::serve::http::serve(listener, app, stop.clone()));
    Ok(format!("{base}/mcp"))
}

/// A stand-in for the team's webhook service: answers every POST with 200.
async fn start_webhook(addr: std::net::SocketAddr, stop: &CancellationToken) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let app = axum::Router::new().fallback(|| async { axum::Json(json!({"delivered": true})) });
    let stop = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    });
    Ok(())
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
        .and_then(|m| m.0.get(bulkhead::policy::meta::SENSITIVITY))
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
    println!("  {step}\n    → {verdict}; session level now: {level}");
    for line in text.lines().take(4) {
        println!("    → {line}");
    }
}

fn reply(step: &str, r: Result<ToolReply, ClientError>) {
    match r {
        Ok(r) => {
            let verdict = if r.is_error {
                "retryable error (the model may fix its arguments and try again)"
            } else {
                "ok"
            };
            let level = r.level.map_or("?", |l| l.as_str());
            println!(
                "  {step}\n    → answered by the {} instance: {verdict}; session level now: {level}",
                r.mode.as_str()
            );
            for line in r.text.lines().take(4) {
                println!("    → {line}");
            }
        }
        Err(ClientError::Fatal(msg)) => {
            println!("  {step}\n    → fatal error: the strict client aborts the run\n    → {msg}")
        }
        Err(e) => println!("  {step}\n    → client error: {e}"),
    }
}

fn token(config: &Config, user: &str, session: &str) -> anyhow::Result<String> {
    let key = config
        .auth
        .keys
        .iter()
        .find_map(|k| k.secret.clone())
        .ok_or_else(|| anyhow::anyhow!("the demo needs an HS256 dev key in auth.keys"))?;
    let claims = MintClaims {
        sub: user.into(),
        session_id: session.into(),
        iss: config.auth.issuer.clone(),
        aud: config.auth.audience.clone(),
        ttl_secs: 600,
    };
    Ok(mint_hs256(key.as_bytes(), &claims)?)
}

/// Runs the scenarios with state and sample data in a temporary folder.
pub fn run(
    project: &'static Project,
    config_path: Option<PathBuf>,
    config: &Config,
) -> anyhow::Result<()> {
    if project.server("template").is_none() || project.deployment("local").is_none() {
        anyhow::bail!(
            "`demo` runs the example project's scenarios: it needs server `template` and deployment `local`, and this project has servers {}",
            project.server_names()
        );
    }
    let dir = tempfile::tempdir()?;
    let mut env = super::samples::seed(&dir.path().join("samples"))?;
    env.push((
        "BULKHEAD_STATE_DIR".into(),
        dir.path().join("state").display().to_string(),
    ));
    env.push((
        "BULKHEAD_WORKSPACES".into(),
        dir.path().join("workspaces").display().to_string(),
    ));
    let permitted = namespaces_permitted();
    let isolated = permitted.is_ok();
    let webhook_host = if isolated { "10.249.0.1" } else { "127.0.0.1" };
    env.push((
        "WEBHOOK_URL".into(),
        format!("http://{webhook_host}:{WEBHOOK_PORT}"),
    ));
    // The stand-in is on a non-public address, which the webhook connector refuses unless its
    // `reach_private` opens it: opened for exactly that address.
    env.push(("WEBHOOK_REACH_PRIVATE".into(), format!("{webhook_host}/32")));
    let mut config = config.clone();
    config.state.dir = dir.path().join("state");
    config.state.workspaces = dir.path().join("workspaces");
    // Before any thread exists: the in-process connectors read their settings from the environment.
    for (k, v) in &env {
        // SAFETY: single-threaded here (no runtime or helper thread has started yet).
        unsafe { std::env::set_var(k, v) };
    }
    let dev_alice = token(&config, "alice", "demo-1")?;
    let dev_bob = token(&config, "bob", "demo-2")?;
    let dep = project
        .deployment("local")
        .ok_or_else(|| anyhow::anyhow!("deployment `local` is missing"))?;
    let running: Option<Running> = if isolated {
        let jail_egress =
            bulkhead::isolation::up::jail_egress_of(project, dep, &|k: &str| std::env::var(k).ok());
        let opts = UpOptions {
            exe: std::env::current_exe()?,
            config: config_path,
            subnet: 249,
            prefix: "bd".into(),
            proxied_egress: None,
            env,
            jail_egress,
        };
        Some(up(dep, &opts)?)
    } else {
        None
    };
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        let stop = CancellationToken::new();
        let (full_url, proxied_url) = match &running {
            Some(r) => (r.instance("template", NetworkMode::Full).map(|i| i.url.clone()), r.instance("template", NetworkMode::Proxied).map(|i| i.url.clone())),
            None => (Some(start_in_process(project, &config, NetworkMode::Full, &stop).await?), Some(start_in_process(project, &config, NetworkMode::Proxied, &stop).await?)),
        };
        let (full_url, proxied_url) = (full_url.ok_or_else(|| anyhow::anyhow!("no full instance"))?, proxied_url.ok_or_else(|| anyhow::anyhow!("no proxied instance"))?);
        start_webhook(format!("{webhook_host}:{WEBHOOK_PORT}").parse()?, &stop).await?;
        // An agent host exchanges the identity provider's token (here the development key plays
        // the provider) for a session token of a fresh session, once per conversation.
        let (alice, bob, caller) = if config.token_service.is_some() {
            let endpoint = format!("{}/token", full_url.trim_end_matches("/mcp"));
            let alice = bulkhead::client::login::exchange(&endpoint, &dev_alice).await.map_err(|e| anyhow::anyhow!("exchange at {endpoint}: {e}"))?;
            let bob = bulkhead::client::login::exchange(&endpoint, &dev_bob).await.map_err(|e| anyhow::anyhow!("exchange at {endpoint}: {e}"))?;
            let caller = format!("alice / session {} (the provider's token exchanged at {endpoint})", alice.session_id);
            (alice.access_token, bob.access_token, caller)
        } else {
            (dev_alice, dev_bob, "alice / session demo-1 (a real HS256 token)".to_string())
        };
        if isolated {
            println!("Template server via `bulkhead up`: the proxied instance runs in its own network namespace;");
            println!("nftables there allows outbound connections only to its squid egress proxy, which allows");
            println!("only the allowlist (hooks.example.com:443).");
        } else {
            let why = permitted.as_ref().err().map(ToString::to_string).unwrap_or_default();
            println!("Template server, two in-process instances: no real isolation here ({why}).");
            println!("Real isolation needs root plus `ip`, `nft` and `squid` (scripts/test installs them); the policy below is the same.");
        }
        println!("  full network: {full_url}\n  proxied:      {proxied_url}\n  webhook stand-in: http://{webhook_host}:{WEBHOOK_PORT}\n  caller: {caller}\n");
        // The agent's side: `get_mcp_client` reads the `mcp_servers` entry (url + url_proxied) and
        // returns the isolating client, which routes every call by the session's level.
        let mut client_config = config.clone();
        let entries = format!("mcp_servers:\n  template:\n    type: client\n    url: {full_url}\n    url_proxied: {proxied_url}\n    read_timeout: 30\n    trusted: true\n");
        let parsed = Config::parse(&format!("auth:\n  issuer: x\n  audience: x\n  keys: []\n{entries}"), "demo", &|_| None)?;
        client_config.mcp_servers = parsed.mcp_servers;
        let agent = get_mcp_client("template", &client_config, &alice).await?;
        println!("The agent uses `get_mcp_client(\"template\")`, an isolating client holding both instances.\n");

        println!("1. A normal read: write a note, read it back.");
        reply("write_file /workspace/notes.txt", agent.call_tool("write_file", json!({"path": "/workspace/notes.txt", "content": "meeting at 10"})).await);
        reply("read_file /workspace/notes.txt", agent.call_tool("read_file", json!({"path": "/workspace/notes.txt"})).await);
        reply("notify_team (connect) while the session holds no private data", agent.call_tool("notify_team", json!({"channel": "ops", "message": "starting"})).await);
        reply("run_python: count the note's words in a jail of this session (needs bubblewrap)", agent.call_tool("run_python", json!({"code": "import socket\nprint(len(open('notes.txt').read().split()), 'words')\nprint('network interfaces:', [n for _, n in socket.if_nameindex()])"})).await);

        println!("\n2. A retryable error: search with an empty query. `search_records` is declared confidential in");
        println!("   tools/list, so the client sends it to the proxied instance and stays there (one-way):");
        reply("search_records query=\"\"", agent.call_tool("search_records", json!({"query": ""})).await);

        println!("\n3. A sensitive load raises the session to confidential:");
        reply("load_sensitive_dataset customers_2026", agent.call_tool("load_sensitive_dataset", json!({"dataset_name": "customers_2026"})).await);
        reply("search_records query=\"Acme\" limit=3", agent.call_tool("search_records", json!({"query": "Acme", "limit": 3})).await);

        println!("\n4. From now on:");
        reply("notify_team (a connect tool)", agent.call_tool("notify_team", json!({"channel": "ops", "message": "customer list attached"})).await);
        reply("read_file /workspace/notes.txt (same workspace, now on the proxied instance)", agent.call_tool("read_file", json!({"path": "/workspace/notes.txt"})).await);
        reply("run_python on the proxied instance: the note is there, the network is not", agent.call_tool("run_python", json!({"code": "import socket\nprint(open('notes.txt').read())\nprint('network interfaces:', [n for _, n in socket.if_nameindex()])"})).await);
        let stale = connect(&full_url, &alice).await?;
        show("a client that never switched calls read_file on the full instance", &call(&stale, "read_file", json!({"path": "/workspace/notes.txt"})).await?);
        stale.cancel().await?;

        if isolated {
            println!("\n5. Defence in depth: bob's session is public, so policy lets `notify_team` run on the proxied");
            println!("   instance — and its egress proxy refuses: the webhook is not on its allowlist (and nftables");
            println!("   lets the namespace reach nothing but that proxy).");
            let b = connect(&proxied_url, &bob).await?;
            show("notify_team from the proxied instance (bob, public session)", &call(&b, "notify_team", json!({"channel": "ops", "message": "hello"})).await?);
            b.cancel().await?;
        }
        agent.close().await;
        stop.cancel();
        drop(running);
        println!("\nDone: every step went through token auth, the workspace, the context preset and the ratchet.");
        Ok(())
    })
}
