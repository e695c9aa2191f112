//! An in-memory client for a project's own tests: one of the project's servers under the
//! engine's whole policy, reached by the official rmcp client over a duplex pipe (no port, no
//! token; its state and workspaces in a temporary folder removed on drop).

use crate::identity::Identity;
use crate::policy::NetworkMode;
use crate::project::Project;
use crate::serve::handler::McpServer;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use std::sync::Arc;

/// Why an in-memory session could not start or a request failed.
#[derive(Debug, thiserror::Error)]
pub enum TestingError {
    /// The temporary state folder.
    #[error("temporary state folder: {0}")]
    Folder(#[from] std::io::Error),
    /// The configuration (the project's embedded `config.yaml` with the state in the folder).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The server did not start (unknown name, store, connectors).
    #[error(transparent)]
    Serve(#[from] crate::serve::ServeError),
    /// The identity of the session.
    #[error("identity: {0}")]
    Identity(String),
    /// The MCP session (initialisation or a request).
    #[error("mcp: {0}")]
    Mcp(String),
}

/// What one tool call answered.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Whether the call was refused or failed (`isError`).
    pub is_error: bool,
    /// The text blocks, joined.
    pub text: String,
    /// `structuredContent`, when the tool declares an output schema.
    pub structured: Option<serde_json::Value>,
}

/// One client session with one server of a project, in memory.
pub struct InMemory {
    client: RunningService<rmcp::RoleClient, ()>,
    _state: tempfile::TempDir,
}

impl std::fmt::Debug for InMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemory").finish_non_exhaustive()
    }
}

impl InMemory {
    /// Starts `server` of `project` in `mode` for `user` (one session), with the project's
    /// embedded configuration and its state in a new temporary folder.
    pub async fn start(
        project: &'static Project,
        server: &str,
        mode: NetworkMode,
        user: &str,
    ) -> Result<InMemory, TestingError> {
        let state = tempfile::tempdir()?;
        let mut config = crate::config::Config::parse(
            project.embedded_config(),
            "config.yaml (embedded)",
            &crate::config::env_lookup,
        )?;
        config.state.dir = state.path().join("state");
        config.state.workspaces = state.path().join("workspaces");
        let rt = Arc::new(crate::serve::runtime(project, &config, server, mode).await?);
        let identity = Identity::new(user, "in-memory-1")
            .map_err(|e| TestingError::Identity(e.to_string()))?;
        let (server_end, client_end) = tokio::io::duplex(64 * 1024);
        let served = McpServer::stdio(rt, identity);
        tokio::spawn(async move {
            if let Ok(s) = served.serve(server_end).await {
                let _ = s.waiting().await;
            }
        });
        let client = ().serve(client_end).await.map_err(|e| TestingError::Mcp(e.to_string()))?;
        Ok(InMemory {
            client,
            _state: state,
        })
    }

    /// The names of the tools the server lists, sorted.
    pub async fn tools(&self) -> Result<Vec<String>, TestingError> {
        let mut names: Vec<String> = self
            .client
            .list_all_tools()
            .await
            .map_err(|e| TestingError::Mcp(e.to_string()))?
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Calls `tool` with `args` (a JSON object).
    pub async fn call(&self, tool: &str, args: serde_json::Value) -> Result<Reply, TestingError> {
        let r = self
            .client
            .call_tool(
                CallToolRequestParams::new(tool.to_string())
                    .with_arguments(args.as_object().cloned().unwrap_or_default()),
            )
            .await
            .map_err(|e| TestingError::Mcp(e.to_string()))?;
        Ok(Reply {
            is_error: r.is_error.unwrap_or(false),
            text: r
                .content
                .iter()
                .filter_map(|b| b.as_text().map(|t| t.text.clone()))
                .collect(),
            structured: r.structured_content,
        })
    }
}
