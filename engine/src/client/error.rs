//! Why a client call failed.

use crate::policy::Sensitivity;

/// A client failure. `Fatal` means the agent run must abort; a tool's own retryable errors are
/// not failures (they come back as a [`super::ToolReply`] with `is_error`).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A trusted server answered `[FATAL] …`; the text is the message without the prefix.
    #[error("fatal tool error: {0}")]
    Fatal(String),
    /// An instance could not be reached or refused the connection.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The instance URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The server answered with a protocol error or the transport broke during a request.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// No answer within the entry's `read_timeout`.
    #[error("no answer from {url} within {seconds} s")]
    Timeout {
        /// The instance URL.
        url: String,
        /// The configured `read_timeout`.
        seconds: u64,
    },
    /// The `mcp_servers` entry is missing or unusable.
    #[error("client configuration: {0}")]
    Config(String),
    /// The session needs a more isolated instance than the entry configures.
    #[error("server `{server}` has no instance that may serve {level} data")]
    NoInstance {
        /// The server name.
        server: String,
        /// The level the session or tool needs.
        level: Sensitivity,
    },
    /// A result contradicts the tool's declared `outputSchema`.
    #[error("tool `{tool}` returned a result that does not match its output schema: {problem}")]
    Schema {
        /// The tool.
        tool: String,
        /// The first mismatch.
        problem: String,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
}
