//! `bulkhead connect <server>`: a stdio MCP server for desktop clients that routes each call
//! to the instance its data needs (see `bulkhead::client::Bridge`).

use bulkhead::client::login::{self, DeviceLogin};
use bulkhead::client::{AskRelay, Bridge, Credential, Renewing, get_mcp_client_asking};
use bulkhead::config::{Config, McpServerEntry};
use rmcp::ServiceExt;

/// Where to connect.
pub struct ConnectArgs {
    /// Server name.
    pub server: String,
    /// Full instance (default: the `mcp_servers` entry's `url`).
    pub url: Option<String>,
    /// Proxied instance.
    pub url_proxied: Option<String>,
    /// Isolated instance.
    pub url_isolated: Option<String>,
}

/// Serves stdio until the desktop client closes it. The bearer token comes from
/// `BULKHEAD_TOKEN` (or the file `BULKHEAD_TOKEN_FILE` names); without it, and with
/// `token_service.login.device_client_id` configured, the user signs in (device grant) and each
/// start exchanges for a session token of a fresh session, refreshed while the bridge runs.
pub fn run(config: &Config, args: ConnectArgs) -> anyhow::Result<()> {
    let fixed = bulkhead::config::env_lookup("BULKHEAD_TOKEN").filter(|t| !t.is_empty());
    let device = config.token_service.as_ref().and_then(|ts| {
        let login = ts.login.as_ref()?;
        Some(DeviceLogin {
            issuer: ts.provider.issuer.clone(),
            client_id: login.device_client_id.clone()?,
            scope: login.scope.clone(),
        })
    });
    if fixed.is_none() && device.is_none() {
        anyhow::bail!(
            "set BULKHEAD_TOKEN to a bearer token (`bulkhead token` prints one), or configure token_service.login.device_client_id to sign in"
        );
    }
    let mut config = config.clone();
    let entry = match (args.url, config.mcp_servers.get(&args.server)) {
        (Some(url), _) => McpServerEntry {
            kind: "client".into(),
            url,
            url_proxied: args.url_proxied,
            url_isolated: args.url_isolated,
            read_timeout: 60,
            trusted: false,
        },
        (None, Some(e)) => McpServerEntry {
            trusted: false,
            ..e.clone()
        },
        (None, None) => anyhow::bail!(
            "no URL for `{}`: pass --url (and --url-proxied, --url-isolated) or add an mcp_servers entry to config.yaml",
            args.server
        ),
    };
    config.mcp_servers.insert(args.server.clone(), entry);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let stop = tokio_util::sync::CancellationToken::new();
        let _stop_renewing = stop.clone().drop_guard();
        let credential = match (fixed, device) {
            (Some(token), _) => Credential::Static(token),
            (None, Some(device)) => {
                let url = &config.mcp_servers[&args.server].url;
                let endpoint = login::token_endpoint(url)
                    .await
                    .map_err(|e| anyhow::anyhow!(e))?;
                let subject = login::device_login(&device)
                    .await
                    .map_err(|e| anyhow::anyhow!(e))?;
                let issued = login::exchange(&endpoint, &subject)
                    .await
                    .map_err(|e| anyhow::anyhow!("exchange at {endpoint}: {e}"))?;
                eprintln!(
                    "bulkhead: session {} (token refreshed at {endpoint})",
                    issued.session_id
                );
                Credential::Renewing(Renewing::start(&issued, &endpoint, stop.clone()))
            }
            (None, None) => unreachable!("checked above"),
        };
        // The instances' questions to a person (approvals) go to the desktop client.
        let relay = AskRelay::to_desktop();
        let client =
            get_mcp_client_asking(&args.server, &config, credential, relay.clone()).await?;
        let bridge = Bridge::asking(&args.server, client, relay);
        let service = bridge.clone().serve(rmcp::transport::io::stdio()).await?;
        service.waiting().await?;
        bridge.close().await;
        Ok(())
    })
}
