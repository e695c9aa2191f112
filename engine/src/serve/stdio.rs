//! stdio serving: identity from configuration, protocol only on stdout, logs on stderr.

use super::handler::McpServer;
use crate::call::Runtime;
use crate::identity::Identity;
use rmcp::ServiceExt;
use std::sync::Arc;

/// Why serving over stdio ended with an error.
#[derive(Debug, thiserror::Error)]
#[expect(
    clippy::large_enum_variant,
    reason = "made once, when a stdio session ends; never stored"
)]
pub enum StdioError {
    /// The client's initialisation failed (closed early, or not MCP).
    #[error("stdio session did not start: {0}")]
    Start(#[from] rmcp::service::ServerInitializeError),
    /// The session's task ended abnormally.
    #[error("stdio session ended abnormally: {0}")]
    Run(#[from] tokio::task::JoinError),
}

/// Serves `rt` over stdin/stdout as `identity` until the client closes the stream.
pub async fn serve(rt: Arc<Runtime>, identity: Identity) -> Result<(), StdioError> {
    let service = McpServer::stdio(rt, identity)
        .serve(rmcp::transport::io::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
