//! Spec file types (serde + schemars). Unknown keys are rejected; the JSON Schemas in
//! `specs/schema/` are emitted from these types.

mod connector;
mod deployment;
mod param;
mod server;

pub use connector::{
    ConnectorKind, ConnectorSpec, Count, FileAction, FilesSettings, HttpMethod, HttpSettings,
    LockedTool, LogsSettings, McpLock, McpSettings, OperationSpec, PostgresSettings,
    SandboxSettings, SqliteSettings,
};
pub use deployment::{
    DeployEnvironment, DeployTarget, DeploymentServer, DeploymentSpec, ImageSpec,
};
pub use param::{ParamSpec, ParamType};
pub use server::{
    HandlerKind, PresetSpec, PromptArgSpec, PromptMessageSpec, PromptRole, PromptSpec,
    ResourceSpec, ServerSpec, ToolSpec,
};

pub use bulkhead_vocab::{Permission, Sensitivity};

/// Which kind of spec a file is, from the folder it lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SpecKind {
    /// `specs/servers/*.yaml`
    Server,
    /// `specs/connectors/*.yaml`
    Connector,
    /// `specs/deployments/*.yaml`
    Deployment,
}

impl SpecKind {
    /// The folder under `specs/` and the schema file stem.
    pub fn folder(self) -> &'static str {
        match self {
            SpecKind::Server => "servers",
            SpecKind::Connector => "connectors",
            SpecKind::Deployment => "deployments",
        }
    }

    /// The schema file stem in `specs/schema/`.
    pub fn schema_name(self) -> &'static str {
        match self {
            SpecKind::Server => "server",
            SpecKind::Connector => "connector",
            SpecKind::Deployment => "deployment",
        }
    }

    /// All kinds, in load order.
    pub const ALL: [SpecKind; 3] = [SpecKind::Connector, SpecKind::Server, SpecKind::Deployment];
}
