//! `bulkhead connect`: a stdio MCP server that holds one [`McpClient`] (the isolating client when
//! the server has more than one instance) and forwards tools, resources and prompts to it (the
//! same surface an HTTP client of the server gets). Desktop
//! clients (Claude Desktop, VS Code, Cursor) start it as their MCP server, so a session moves one
//! way across the instances exactly as an agent's would: confidential and secret tools answer
//! from the proxied and isolated instances, and connect tools are refused after them.
//!
//! Results pass through unchanged, `[FATAL] ` ones included (the desktop model reads them); a
//! failure of the client itself (an instance unreachable, a result that breaks its declared
//! schema) becomes a `[FATAL] ` tool result naming it. Answers follow the desktop client's era:
//! complete results say so (`resultType`) on 2026-07-28, where a person's question becomes an
//! `input_required` round ([`super::rounds`]); on 2025 sessions it is `elicitation/create`.

use super::McpClient;
use crate::errors::FATAL_PREFIX;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ResultType, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::Arc;

/// The stdio face of one client.
#[derive(Clone)]
pub struct Bridge {
    server: String,
    client: Arc<McpClient>,
    relay: super::AskRelay,
    rounds: Arc<super::rounds::Rounds>,
}

impl Bridge {
    /// Forwards to `client`, which reaches server `server`.
    pub fn new(server: &str, client: McpClient) -> Bridge {
        Bridge::asking(server, client, super::AskRelay::none())
    }

    /// Forwards to `client`, whose questions to a person go through `relay` to the desktop
    /// client that made the call (see [`super::AskRelay`]).
    pub fn asking(server: &str, client: McpClient, relay: super::AskRelay) -> Bridge {
        Bridge {
            server: server.to_string(),
            client: Arc::new(client),
            relay,
            rounds: Arc::default(),
        }
    }

    /// Closes the client's connections.
    pub async fn close(&self) {
        self.client.close().await;
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
            .with_server_info(Implementation::new(
                format!("bulkhead-connect-{}", self.server),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "Tools of the Bulkhead server `{}`. Each call runs on the instance its data needs; once a session holds confidential data, tools that reach the internet are refused.",
                self.server
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.client
            .list_tools()
            .await
            .map(ListToolsResult::with_all_items)
            .map_err(|e| ErrorData::internal_error(format!("bulkhead connect: {e}"), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if is_rounds_era(&ctx) {
            return self.rounds.call(&self.client, &self.relay, request).await;
        }
        // A question the instance asks during this call (an approval) goes to this desktop client.
        self.relay.set(ctx.peer.clone());
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let mut result = match self.client.call_tool(&request.name, args).await {
            Ok(reply) => reply.raw,
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "{FATAL_PREFIX}bulkhead connect: {e}"
            ))]),
        };
        // rmcp removes it again for 2025 peers.
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.client
            .list_resources()
            .await
            .map(ListResourcesResult::with_all_items)
            .map_err(failed)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.client
            .list_resource_templates()
            .await
            .map(ListResourceTemplatesResult::with_all_items)
            .map_err(failed)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.client
            .read_resource(&request.uri)
            .await
            .map_err(failed)?
            .map(|mut r| {
                r.result_type = Some(ResultType::COMPLETE);
                r.into()
            })
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.client
            .list_prompts()
            .await
            .map(ListPromptsResult::with_all_items)
            .map_err(failed)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.client
            .get_prompt(&request.name, request.arguments)
            .await
            .map_err(failed)?
            .map(|mut r| {
                r.result_type = Some(ResultType::COMPLETE);
                r.into()
            })
    }
}

/// Whether the desktop client speaks 2026-07-28 or later in this request (questions go back
/// as `input_required` answers, never as requests of ours).
fn is_rounds_era(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// A failure of the client itself, as the desktop client sees it.
fn failed(e: super::ClientError) -> ErrorData {
    ErrorData::internal_error(format!("bulkhead connect: {e}"), None)
}
