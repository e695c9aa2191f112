//! Bulkhead's policy vocabulary, shared by the generator (`bulkhead-codegen`), the runtime and
//! the client so that each word and each rule is written once: the sensitivity levels, the
//! permissions, the network modes, which instance may serve which level (placement), the names
//! of per-mode workspace layers, the address ranges that are not the internet, parsed egress endpoints and the `_meta` keys on the wire.
//!
//! Like cxx's `syntax` module, compiled into both the build-time generator and the runtime:
//! the two cannot disagree about a rule because there is only one of it.

mod approval;
pub mod connector;
mod endpoint;
mod layer;
pub mod meta;
mod mode;
mod permission;
pub mod ranges;
mod rate;
mod sensitivity;

pub use approval::{Approval, Approver, Condition as ApprovalCondition, path_under};
pub use endpoint::{HostPort, HostPortError};
pub use layer::workspace_layer;
pub use mode::{Egress, NetworkMode};
pub use permission::Permission;
pub use rate::RateLimit;
pub use sensitivity::Sensitivity;
