//! stdio serving: identity from configuration, protocol only on stdout, logs on stderr.

use super::handler::McpServer;
use crate::call::Runtime;
use crate::identity::Identity;
use rmcp::ServiceExt;
use std::sync::Arc;

/// Serves `rt` over stdin/stdout as `identity` until the client closes the stream.
pub async fn serve(rt: Arc<Runtime>, identity: Identity) -> anyhow::Result<()> {
    let service = McpServer::stdio(rt, identity)
        .serve(rmcp::transport::io::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
