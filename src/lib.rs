//! Bulkhead runtime: the policy every generated MCP server runs under.
//!
//! Generated code imports only [`codegen`]; everything else is the runtime's own.

extern crate self as bulkhead;

pub mod auth;
pub mod call;
pub mod client;
pub mod codegen;
pub mod compliance;
pub mod config;
pub mod connectors;
pub mod context;
pub mod errors;
pub mod handlers;
pub mod identity;
pub mod isolation;
pub mod policy;
pub mod serve;
pub mod server;
pub mod servers;
pub mod tooldef;
pub mod workspace;
