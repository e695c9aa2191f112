//! Bulkhead's engine: the policy every generated MCP server runs under, and the command line a
//! project's binary runs (`bulkhead::cli::main(&servers::PROJECT)`).
//!
//! Generated code imports only [`codegen`]; everything else is the runtime's own.

extern crate self as bulkhead;

/// A named point where tests inject a fault (`fail` crate). Compiled to nothing unless the
/// `failpoints` feature is on, which only the test command enables.
macro_rules! failpoint {
    ($name:literal) => {
        fail::fail_point!($name)
    };
}
pub(crate) use failpoint;

#[cfg(feature = "failpoints")]
pub mod failpoints;

pub mod approval;
pub mod audit;
pub mod auth;
pub mod call;
pub mod cli;
pub mod client;
pub mod clock;
pub mod codegen;
pub mod config;
pub mod connectors;
pub mod context;
pub mod endpoint;
pub mod errors;
pub mod identity;
pub mod inspect;
pub mod isolation;
pub mod jail;
pub mod metrics;
pub mod pg_tls;
pub mod policy;
pub mod project;
pub mod ratelimit;
pub mod ratelog;
pub mod relay;
pub mod resourcedef;
pub mod seal;
pub mod serve;
pub mod server;
pub mod serverdef;
pub mod sessions;
pub mod signals;
pub mod state;
pub mod telemetry;
pub mod testing;
pub mod tooldef;
pub mod tunnel;
pub mod workspace;
