//! `get_mcp_client`: the client for a `config.yaml` `mcp_servers` entry.

use super::{ClientError, IsolatingClient, McpClient, StrictClient};
use crate::config::{Config, McpServerEntry};
use crate::policy::NetworkMode;

/// The instances an entry configures, least isolated first.
pub fn instances(entry: &McpServerEntry) -> Vec<(NetworkMode, String)> {
    let mut out = vec![(NetworkMode::Full, entry.url.clone())];
    if let Some(u) = &entry.url_proxied {
        out.push((NetworkMode::Proxied, u.clone()));
    }
    if let Some(u) = &entry.url_isolated {
        out.push((NetworkMode::None, u.clone()));
    }
    out
}

fn check(name: &str, entry: &McpServerEntry) -> Result<(), ClientError> {
    let bad = |what: String| Err(ClientError::Config(format!("mcp_servers.{name}: {what}")));
    if entry.kind != "client" {
        return bad(format!("type must be `client`, not `{}`", entry.kind));
    }
    if entry.read_timeout == 0 {
        return bad("read_timeout must be at least 1 second".into());
    }
    for (_, url) in instances(entry) {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return bad(format!("`{url}` is not an http(s) URL"));
        }
    }
    Ok(())
}

/// Connects to server `name` of `config.mcp_servers` with a bearer `token`: an isolating
/// client when `url_proxied` or `url_isolated` is configured, a strict client otherwise.
pub async fn get_mcp_client(
    name: &str,
    config: &Config,
    token: &str,
) -> Result<McpClient, ClientError> {
    get_mcp_client_asking(name, config, token, super::AskRelay::none()).await
}

/// [`get_mcp_client`] whose instances' questions to a person go to `relay` (`bulkhead connect`).
pub async fn get_mcp_client_asking(
    name: &str,
    config: &Config,
    token: impl Into<super::Credential>,
    relay: super::AskRelay,
) -> Result<McpClient, ClientError> {
    let token: super::Credential = token.into();
    let entry = config.mcp_servers.get(name).ok_or_else(|| {
        let known: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
        ClientError::Config(format!(
            "no mcp_servers entry named `{name}` (known: {})",
            known.join(", ")
        ))
    })?;
    check(name, entry)?;
    let all = instances(entry);
    if all.len() == 1 {
        let c = StrictClient::connect_asking(
            &entry.url,
            token,
            NetworkMode::Full,
            entry.read_timeout,
            entry.trusted,
            relay,
        )
        .await?;
        return Ok(McpClient::Strict(c));
    }
    let c = IsolatingClient::connect_asking(
        name,
        &all,
        token,
        entry.read_timeout,
        entry.trusted,
        relay,
    )
    .await?;
    Ok(McpClient::Isolating(c))
}
