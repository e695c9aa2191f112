//! The client side of Bulkhead: connect to the instances of a server listed in `config.yaml`
//! `mcp_servers`, turn trusted `[FATAL] ` results into hard errors, and follow the session's
//! sensitivity from the normal instance to the more isolated ones, one way.

mod asks;
mod bridge;
mod config;
mod error;
mod isolating;
pub mod login;
mod renewing;
mod reply;
mod rounds;
mod route;
mod strict;

pub use asks::AskRelay;
pub use bridge::Bridge;
pub use config::{get_mcp_client, get_mcp_client_asking, instances};
pub use error::ClientError;
pub use isolating::IsolatingClient;
pub use renewing::{BearerClient, Credential, Renewing};
pub use reply::{ModeRefusal, ToolReply};
pub use route::Ratchet;
pub use strict::StrictClient;

use crate::policy::NetworkMode;
use rmcp::model::Tool;
use serde_json::Value;

/// A client for one configured server: strict (one instance) or isolating (several instances).
pub enum McpClient {
    /// Only `url` is configured.
    Strict(StrictClient),
    /// `url_proxied` or `url_isolated` is configured as well.
    Isolating(IsolatingClient),
}

impl McpClient {
    /// Calls `name` with `args` (a JSON object or `null`); see [`StrictClient::call_tool`] and
    /// [`IsolatingClient::call_tool`].
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<ToolReply, ClientError> {
        match self {
            McpClient::Strict(c) => c.call_tool(name, args).await,
            McpClient::Isolating(c) => c.call_tool(name, args).await,
        }
    }

    /// The server's tools, as listed by the instance that would serve the next call.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        match self {
            McpClient::Strict(c) => c.list_tools().await,
            McpClient::Isolating(c) => c.list_tools().await,
        }
    }

    /// The instance listings and prompts come from: the only one, or the one the next call
    /// would use.
    fn current(&self) -> Result<&StrictClient, ClientError> {
        match self {
            McpClient::Strict(c) => Ok(c),
            McpClient::Isolating(c) => c.current(),
        }
    }

    /// The server's fixed resources.
    pub async fn list_resources(&self) -> Result<Vec<rmcp::model::Resource>, ClientError> {
        self.current()?.list_resources().await
    }

    /// The server's resource templates.
    pub async fn list_resource_templates(
        &self,
    ) -> Result<Vec<rmcp::model::ResourceTemplate>, ClientError> {
        self.current()?.list_resource_templates().await
    }

    /// Reads `uri`, routed like a tool call (see [`IsolatingClient::read_resource`]); the
    /// server's refusal is the inner `Err`.
    pub async fn read_resource(
        &self,
        uri: &str,
    ) -> Result<Result<rmcp::model::ReadResourceResult, rmcp::ErrorData>, ClientError> {
        match self {
            McpClient::Strict(c) => c.read_resource(uri).await,
            McpClient::Isolating(c) => c.read_resource(uri).await,
        }
    }

    /// The server's prompts.
    pub async fn list_prompts(&self) -> Result<Vec<rmcp::model::Prompt>, ClientError> {
        self.current()?.list_prompts().await
    }

    /// Renders a prompt (fixed text: the current instance answers); the server's refusal is
    /// the inner `Err`.
    pub async fn get_prompt(
        &self,
        name: &str,
        args: Option<serde_json::Map<String, Value>>,
    ) -> Result<Result<rmcp::model::GetPromptResult, rmcp::ErrorData>, ClientError> {
        self.current()?.get_prompt(name, args).await
    }

    /// The network mode of the instance the next call would go to (at least).
    pub fn current_mode(&self) -> NetworkMode {
        match self {
            McpClient::Strict(c) => c.mode(),
            McpClient::Isolating(c) => c.current_mode(),
        }
    }

    /// Closes every connection (each transport session is deleted on the server).
    pub async fn close(&self) {
        match self {
            McpClient::Strict(c) => c.close().await,
            McpClient::Isolating(c) => c.close().await,
        }
    }
}
