//! Bulkhead runtime: the policy every generated MCP server runs under.
//!
//! Generated code imports only [`codegen`]; everything else is the runtime's own.

pub mod errors;
pub mod identity;
pub mod policy;
pub mod workspace;
