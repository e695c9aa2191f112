//! The one surface generated code imports (`use ::bulkhead::codegen as bh;`), like `tonic::codegen`.
//! Nothing here holds policy: it names types and the entry points of the runtime wrapper.

pub use crate::errors::ToolError;
pub use crate::policy::{Permission, Sensitivity};
pub use crate::project::Project;
pub use crate::resourcedef::{PromptArgDef, PromptDef, PromptMessageDef, PromptRole, ResourceDef};
pub use crate::server::{
    BoxFuture, HandlerSet, JsonObject, NoHandlers, Server, ToolContext, ToolOutput, ToolResult,
    parse_args, to_output, unknown_handler,
};
pub use crate::serverdef::ServerDef;
pub use crate::tooldef::{
    Annotations, Approval, ApprovalCondition, Approver, Bound, ConnectorDef, DeployedServerDef,
    DeploymentDef, Inspection, OperationDef, PresetDef, RateLimit, Target, ToolDef,
};
pub use bulkhead_vocab::connector::{ConnectorKind, OperationBody};
pub use serde;
pub use serde::{Deserialize, Serialize};
