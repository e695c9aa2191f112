//! `bulkhead connect <server>`: a stdio MCP server for desktop clients that routes each call
//! to the instance its data needs (see `bulkhead::client::Bridge`).

use bulkhead::client::login::{self, BrowserLogin, DeviceLogin};

/// How `connect` signs the user in.
enum SignIn {
    /// Authorization code with PKCE, redirected to a loopback port.
    Browser(BrowserLogin),
    /// The device authorization grant.
    Device(DeviceLogin),
}
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
    /// Sign in with the device grant even when a browser sign-in is configured.
    pub device: bool,
}

/// Serves stdio until the desktop client closes it. The bearer token comes from
/// `BULKHEAD_TOKEN` (or the file `BULKHEAD_TOKEN_FILE` names); without it, and with
/// `token_service.login.native_client_id` (browser, loopback redirect) or `device_client_id`
/// (device grant) configured, the user signs in and each start exchanges for a session token of
/// a fresh session, refreshed while the bridge runs.
pub fn run(config: &Config, args: ConnectArgs) -> anyhow::Result<()> {
    let fixed = bulkhead::config::env_lookup("BULKHEAD_TOKEN").filter(|t| !t.is_empty());
    // How to sign in: in a browser (a native client at the provider) unless `--device` or only
    // a device client is configured.
    let sign_in = config.token_service.as_ref().and_then(|ts| {
        let login = ts.login.as_ref()?;
        let issuer = ts.provider.issuer.clone();
        let scope = login.scope.clone();
        match (
            &login.native_client_id,
            &login.device_client_id,
            args.device,
        ) {
            (Some(client_id), _, false) | (Some(client_id), None, true) => {
                Some(SignIn::Browser(BrowserLogin {
                    issuer,
                    client_id: client_id.clone(),
                    scope,
                }))
            }
            (_, Some(client_id), _) => Some(SignIn::Device(DeviceLogin {
                issuer,
                client_id: client_id.clone(),
                scope,
            })),
            (None, None, _) => None,
        }
    });
    if fixed.is_none() && sign_in.is_none() {
        anyhow::bail!(
            "set BULKHEAD_TOKEN to a bearer token (`bulkhead token` prints one), or configure token_service.login.native_client_id or device_client_id to sign in"
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
        let credential = match (fixed, sign_in) {
            (Some(token), _) => Credential::Static(token),
            (None, Some(sign_in)) => {
                let url = &config.mcp_servers[&args.server].url;
                let endpoint = login::token_endpoint(url)
                    .await
                    .map_err(|e| anyhow::anyhow!(e))?;
                let subject = match &sign_in {
                    SignIn::Browser(b) => login::browser_login(b).await,
                    SignIn::Device(d) => login::device_login(d).await,
                }
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
