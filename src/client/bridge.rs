//! `bulkhead connect`: a stdio MCP server that holds one [`McpClient`] (the isolating client when
//! the server has more than one instance) and forwards `tools/list` and `tools/call` to it. Desktop
//! clients (Claude Desktop, VS Code, Cursor) start it as their MCP server, so a session moves one
//! way across the instances exactly as an agent's would: confidential and secret tools answer
//! from the proxied and isolated instances, and connect tools are refused after them.
//!
//! Results pass through unchanged, `[FATAL] ` ones included (the desktop model reads them); a
//! failure of the client itself (an instance unreachable, a result that breaks its declared
//! schema) becomes a `[FATAL] ` tool result naming it.

use super::McpClient;
use crate::errors::FATAL_PREFIX;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
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
}

impl Bridge {
    /// Forwards to `client`, which reaches server `server`.
    pub fn new(server: &str, client: McpClient) -> Bridge {
        Bridge {
            server: server.to_string(),
            client: Arc::new(client),
        }
    }

    /// Closes the client's connections.
    pub async fn close(&self) {
        self.client.close().await;
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let result = match self.client.call_tool(&request.name, args).await {
            Ok(reply) => reply.raw,
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "{FATAL_PREFIX}bulkhead connect: {e}"
            ))]),
        };
        Ok(result.into())
    }
}
