//! A project as the engine runs it: the servers, connectors and deployments its generated code
//! declares, and its own `config.yaml`. The engine never names a project's servers; the project's
//! binary hands this value to [`crate::cli::main`].

use crate::server::Server;
use crate::serverdef::ServerDef;
use crate::tooldef::{ConnectorDef, DeploymentDef};

/// Everything a project's generated code declares (`generated/rust/mod.rs` emits one `PROJECT`).
#[derive(Debug)]
pub struct Project {
    /// Every server, sorted by name.
    pub servers: &'static [&'static ServerDef],
    /// Every connector.
    pub connectors: &'static [ConnectorDef],
    /// Every deployment, sorted by name.
    pub deployments: &'static [DeploymentDef],
    /// The runnable server of a name, wired to the project's handlers.
    pub server: fn(&str) -> Option<Server>,
    /// The project's `config.yaml` as it was when the binary was built (used when no file is
    /// given and none is in the working folder), or `None` for the engine's defaults.
    pub config: Option<&'static str>,
}

impl Project {
    /// The runnable server `name`.
    pub fn server(&self, name: &str) -> Option<Server> {
        (self.server)(name)
    }

    /// The names of every server, sorted, joined with `, ` (for "unknown server" messages).
    pub fn server_names(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The deployment `name`.
    pub fn deployment(&self, name: &str) -> Option<&'static DeploymentDef> {
        self.deployments.iter().find(|d| d.name == name)
    }

    /// The embedded configuration text: the project's, else the engine's defaults.
    pub fn embedded_config(&self) -> &'static str {
        self.config.unwrap_or(crate::config::EMBEDDED)
    }
}
