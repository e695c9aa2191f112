//! What an operation does, per connector kind: the one type the generator builds from a spec,
//! the emitted code carries (as JSON) and the runtime reads back at start.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Built-in actions of the `files` and `logs` kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileAction {
    /// Read one file (`path`).
    Read,
    /// Write one file (`path`, `content`).
    Write,
    /// Delete one file (`path`).
    Delete,
    /// List files (`path`, `pattern`).
    List,
    /// Search with a regex (`pattern`, `path`, `context_lines`, and for logs `since`/`until`).
    Search,
}

impl FileAction {
    /// The spec spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FileAction::Read => "read",
            FileAction::Write => "write",
            FileAction::Delete => "delete",
            FileAction::List => "list",
            FileAction::Search => "search",
        }
    }
}

/// HTTP methods an `http` operation may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// PATCH
    Patch,
    /// DELETE
    Delete,
}

impl HttpMethod {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }
}

/// What an operation does, per connector kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OperationBody {
    /// A built-in workspace file action.
    Files {
        /// The action.
        action: FileAction,
    },
    /// Parameterised SQL (`sqlite` and `postgres` connectors).
    Sql {
        /// The statement.
        sql: String,
        /// Whether it writes (anything but SELECT/WITH … SELECT/EXPLAIN).
        writes: bool,
    },
    /// An HTTP request.
    Http {
        /// Method.
        method: HttpMethod,
        /// Path template.
        path: String,
        /// Params sent as query.
        query: Vec<String>,
        /// Params sent as JSON body.
        body: Vec<String>,
        /// Params sent as request headers (absent in bodies generated before headers existed).
        #[serde(default)]
        headers: Vec<String>,
        /// Parameters the service names otherwise (a query key, body field or header name that
        /// is not a spec name): (spec name, service name), sorted.
        #[serde(default)]
        renames: Vec<(String, String)>,
    },
    /// A log search.
    Logs {
        /// The action (search).
        action: FileAction,
    },
    /// A program run in the session's jail.
    Sandbox {
        /// The program and its arguments (`{param}` elements are replaced by values).
        command: Vec<String>,
    },
    /// A call of one upstream MCP tool.
    Mcp {
        /// The upstream tool's name.
        tool: String,
        /// Its pinned definition hash (`sha256:…`) from the lock.
        pin: String,
        /// The pinned definition's canonical text (to name what drifted).
        definition: String,
        /// The pinned upstream (`name@version`).
        server: String,
        /// Whether the upstream is reached over the network (`url`) rather than launched.
        remote: bool,
        /// Parameters the upstream names otherwise: (spec name, upstream name), sorted.
        renames: Vec<(String, String)>,
    },
    /// Test-only: the arguments back.
    #[cfg(feature = "fixture-kind")]
    Echo,
}

impl OperationBody {
    /// Whether the operation changes data.
    pub fn writes(&self) -> bool {
        match self {
            OperationBody::Files { action } => {
                matches!(action, FileAction::Write | FileAction::Delete)
            }
            OperationBody::Sql { writes, .. } => *writes,
            OperationBody::Http { method, .. } => *method != HttpMethod::Get,
            OperationBody::Logs { .. } => false,
            OperationBody::Sandbox { .. } => true,
            // What an upstream tool does is the author's declaration (`permission`), not the
            // upstream's say: it is untrusted.
            OperationBody::Mcp { .. } => false,
            #[cfg(feature = "fixture-kind")]
            OperationBody::Echo => false,
        }
    }

    /// Whether the operation reaches the network outside the deployment.
    pub fn reaches_network(&self) -> bool {
        match self {
            OperationBody::Http { .. } => true,
            OperationBody::Mcp { remote, .. } => *remote,
            OperationBody::Files { .. }
            | OperationBody::Sql { .. }
            | OperationBody::Logs { .. }
            | OperationBody::Sandbox { .. } => false,
            #[cfg(feature = "fixture-kind")]
            OperationBody::Echo => false,
        }
    }
}
