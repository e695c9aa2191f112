//! A client of every instance of one server (full, proxied, isolated) that routes each call to
//! the least isolated instance allowed to serve it, and never back. The level comes from each
//! result's `_meta`, each tool's declared sensitivity (from `tools/list`) and mode refusals, and
//! is shared by every client of the same session in the process (`route::for_session`), so all
//! servers of the session move together.

use super::route::Ratchet;
use super::strict::classify;
use super::{ClientError, StrictClient, ToolReply};
use crate::policy::meta;
use crate::policy::{NetworkMode, Sensitivity};
use futures::future::join_all;
use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Tool};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::RwLock;

/// Connections to all configured instances of a server, routed by the session's level.
pub struct IsolatingClient {
    server: String,
    trusted: bool,
    /// Least isolated first; one per mode.
    instances: Vec<StrictClient>,
    modes: Vec<NetworkMode>,
    declared: RwLock<HashMap<String, Sensitivity>>,
    /// The session's routing state, shared with this process's other clients of the session.
    ratchet: std::sync::Arc<Ratchet>,
}

impl IsolatingClient {
    /// Opens every instance in `instances` (mode and URL) with `token`. If any cannot be
    /// opened, or the tool list cannot be read, closes the ones already open and fails.
    pub async fn connect(
        server: &str,
        instances: &[(NetworkMode, String)],
        token: &str,
        read_timeout: u64,
        trusted: bool,
    ) -> Result<IsolatingClient, ClientError> {
        Self::connect_asking(
            server,
            instances,
            token,
            read_timeout,
            trusted,
            super::AskRelay::none(),
        )
        .await
    }

    /// [`connect`](IsolatingClient::connect) with every instance's questions to a person going
    /// to `relay`. A question is answered inside the call that asked it, on the instance that
    /// asked: it never moves the session to another instance.
    pub async fn connect_asking(
        server: &str,
        instances: &[(NetworkMode, String)],
        token: impl Into<super::Credential>,
        read_timeout: u64,
        trusted: bool,
        relay: super::AskRelay,
    ) -> Result<IsolatingClient, ClientError> {
        let mut sorted = instances.to_vec();
        sorted.sort_by_key(|(m, _)| *m);
        sorted.dedup_by_key(|(m, _)| *m);
        if sorted.len() != instances.len() || sorted.is_empty() {
            return Err(ClientError::Config(format!(
                "server `{server}` needs one URL per network mode"
            )));
        }
        let credential: super::Credential = token.into();
        let opened = join_all(sorted.iter().map(|(mode, url)| {
            StrictClient::connect_asking(
                url,
                credential.clone(),
                *mode,
                read_timeout,
                trusted,
                relay.clone(),
            )
        }))
        .await;
        let mut clients = Vec::new();
        let mut failure = None;
        for r in opened {
            match r {
                Ok(c) => clients.push(c),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            join_all(clients.iter().map(StrictClient::close)).await;
            return Err(e);
        }
        let client = IsolatingClient {
            server: server.to_string(),
            trusted,
            modes: clients.iter().map(StrictClient::mode).collect(),
            instances: clients,
            declared: RwLock::new(HashMap::new()),
            ratchet: super::route::for_session(&credential.current()),
        };
        if let Err(e) = client.list_tools().await {
            client.close().await;
            return Err(e);
        }
        Ok(client)
    }

    /// The least isolated mode the next call may use; only ever rises.
    pub fn current_mode(&self) -> NetworkMode {
        self.ratchet.mode()
    }

    /// The session's level as far as this client has seen it.
    pub fn known_level(&self) -> Sensitivity {
        self.ratchet.level()
    }

    /// Calls `name` on the least isolated instance allowed to serve `max(known level, the
    /// tool's declared sensitivity)`. A mode refusal raises the floor and retries once on the
    /// instance it names; a trusted `[FATAL] ` result is [`ClientError::Fatal`].
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<ToolReply, ClientError> {
        let declared = self.declared_sensitivity(name);
        let first = self.pick(declared)?;
        let reply = self.instance(first).call_raw(name, args.clone()).await?;
        self.observe(&reply);
        let reply = match reply.mode_refusal() {
            Some(refusal) if refusal.0 > first => {
                tracing::info!(server = %self.server, from = %first, to = %refusal.0, "instance refused the session's level; switching");
                self.ratchet.raise_mode(refusal.0);
                let second = self.pick(declared)?;
                let retried = self.instance(second).call_raw(name, args).await?;
                self.observe(&retried);
                retried
            }
            _ => reply,
        };
        classify(reply, self.trusted)
    }

    /// The tools, as listed by the instance the next call would use; refreshes the declared
    /// sensitivities used for routing.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let mode = self.pick(Sensitivity::Public)?;
        let tools = self.instance(mode).list_tools().await?;
        let mut declared = self.declared.write().unwrap_or_else(|p| p.into_inner());
        for tool in &tools {
            let level = tool
                .meta
                .as_ref()
                .and_then(|m| m.0.get(meta::SENSITIVITY))
                .and_then(Value::as_str)
                .and_then(Sensitivity::parse);
            if let Some(level) = level {
                declared.insert(tool.name.to_string(), level);
            }
        }
        Ok(tools)
    }

    /// Reads `uri` like a tool call is routed: on the least isolated instance the known level
    /// allows; a refusal naming a more isolated mode (in its `data`) raises the floor and is
    /// retried once there. The result's `_meta` level raises the session's known level.
    pub async fn read_resource(
        &self,
        uri: &str,
    ) -> Result<Result<ReadResourceResult, ErrorData>, ClientError> {
        let first = self.pick(Sensitivity::Public)?;
        let read = self.instance(first).read_resource(uri).await?;
        let refused_for = |r: &Result<ReadResourceResult, ErrorData>| {
            let data = r.as_ref().err()?.data.as_ref()?;
            data.get(meta::REQUIRED_MODE)?
                .as_str()
                .and_then(NetworkMode::parse)
        };
        let read = match refused_for(&read) {
            Some(mode) if mode > first => {
                tracing::info!(server = %self.server, from = %first, to = %mode, "instance refused the session's level; switching");
                self.ratchet.raise_mode(mode);
                let second = self.pick(Sensitivity::Public)?;
                self.instance(second).read_resource(uri).await?
            }
            _ => read,
        };
        let level = match &read {
            Ok(r) => r
                .meta
                .as_ref()
                .and_then(|m| m.0.get(meta::SENSITIVITY))
                .cloned(),
            Err(e) => e
                .data
                .as_ref()
                .and_then(|d| d.get(meta::SENSITIVITY))
                .cloned(),
        };
        if let Some(level) = level
            .as_ref()
            .and_then(Value::as_str)
            .and_then(Sensitivity::parse)
        {
            self.ratchet.raise_level(level);
        }
        Ok(read)
    }

    /// The instance the next call would use (listings come from it).
    pub fn current(&self) -> Result<&StrictClient, ClientError> {
        Ok(self.instance(self.pick(Sensitivity::Public)?))
    }

    /// Closes every connection.
    pub async fn close(&self) {
        join_all(self.instances.iter().map(StrictClient::close)).await;
    }

    fn declared_sensitivity(&self, name: &str) -> Sensitivity {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied()
            .unwrap_or_default()
    }

    fn pick(&self, declared: Sensitivity) -> Result<NetworkMode, ClientError> {
        self.ratchet
            .route(declared, &self.modes)
            .map_err(|level| ClientError::NoInstance {
                server: self.server.clone(),
                level,
            })
    }

    fn instance(&self, mode: NetworkMode) -> &StrictClient {
        // `pick` only returns modes taken from `self.modes`, which mirror `self.instances`.
        let i = self.modes.iter().position(|m| *m == mode).unwrap_or(0);
        &self.instances[i]
    }

    fn observe(&self, reply: &ToolReply) {
        if let Some(level) = reply.level {
            self.ratchet.raise_level(level);
        }
    }
}
