//! Reading an upstream for the CLI: start it from a connector's settings, and make the lock
//! (`<connector>.lock.json`) from what it lists.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Settings, pin, upstream};

/// What an upstream says about itself and its tools.
pub struct Listing {
    /// `name@version` from its handshake.
    pub server: String,
    /// The protocol version the handshake settled on.
    pub protocol: String,
    /// Every tool it lists, with its definition (as the lock keeps it).
    pub tools: Vec<(rmcp::model::Tool, Value)>,
}

/// Starts the upstream of `settings` (expanded), lists it, and stops it.
pub async fn list(connector: &'static str, settings: Value) -> anyhow::Result<Listing> {
    let s = serde_json::from_value(settings)
        .map_err(|e| anyhow::anyhow!("settings of `{connector}`: {e}"))
        .and_then(|given| {
            Settings::read(given).map_err(|e| anyhow::anyhow!("`{connector}`: {e}"))
        })?;
    // Listed in its jail like on an instance, with no network but loopback (a listing needs
    // none) and, for an upstream of one session, an empty folder at /workspace.
    let dir = tempfile::tempdir()?;
    let ws = if s.per_session() {
        let root = crate::workspace::WorkspaceRoot::new(dir.path().join("workspaces"))?;
        Some(root.session(&crate::identity::Identity::new("lock", "lock")?)?)
    } else {
        None
    };
    let confine = match &s.command {
        Some(c) => Some(
            // The lock is made on `none`: no way out is opened whatever `egress` says.
            super::confine::Confine::new(
                connector,
                c,
                &s,
                crate::jail::egress::Egress::none(connector),
                None,
            )
            .map_err(|e| anyhow::anyhow!("settings of `{connector}`: {e}"))?,
        ),
        None => None,
    };
    let live = super::start(
        connector,
        &s,
        confine.as_ref(),
        crate::policy::NetworkMode::None,
        ws.as_ref(),
    )
    .await?;
    let tools = upstream::list_tools_of(&live, s.bounds()).await?;
    let server = live.server().to_string();
    let protocol = live.protocol().to_string();
    drop(live);
    Ok(Listing {
        server,
        protocol,
        tools: tools
            .into_iter()
            .map(|t| {
                let d = pin::definition(&t);
                (t, d)
            })
            .collect(),
    })
}

/// The lock for `listing` (every listed tool pinned), keeping `package` as given.
pub fn lock_json(listing: &Listing, package: Option<&str>) -> Value {
    let tools: BTreeMap<String, Value> = listing
        .tools
        .iter()
        .map(|(t, d)| {
            (
                t.name.to_string(),
                json!({ "pin": pin::pin_of(d), "definition": d }),
            )
        })
        .collect();
    let mut lock = json!({ "server": listing.server, "tools": tools });
    if let Some(p) = package {
        lock["package"] = Value::String(p.to_string());
    }
    lock
}
