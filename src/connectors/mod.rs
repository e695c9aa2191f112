//! Connectors: data operations behind tools. No MCP or HTTP-server types in here; the wrapper in
//! `call` applies every policy before and after.

mod files;

use crate::errors::ToolError;
use crate::server::{JsonObject, Server, ToolResult};
use crate::tooldef::OperationBody;
use crate::workspace::SessionWorkspace;

/// Runs `connector.operation` with validated arguments.
pub async fn call(
    server: &Server,
    connector: &str,
    operation: &str,
    ws: &SessionWorkspace,
    args: JsonObject,
) -> ToolResult {
    let def = server
        .connector(connector)
        .ok_or_else(|| ToolError::bug(format!("connector `{connector}` is not compiled in")))?;
    let op = def.operation(operation).ok_or_else(|| {
        ToolError::bug(format!(
            "operation `{connector}.{operation}` is not compiled in"
        ))
    })?;
    match &op.body {
        OperationBody::Files { action } => files::run(action, ws, &args),
        OperationBody::Sqlite { .. } | OperationBody::Http { .. } | OperationBody::Logs { .. } => {
            Err(ToolError::fatal(format!(
                "connector kind `{}` is not available in this build of bulkhead",
                def.kind
            )))
        }
    }
}

/// A string argument that the schema made required.
pub(crate) fn arg_str<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(|v| v.as_str())
        .ok_or_else(|| ToolError::retry(format!("`{name}` must be a string")))
}
