//! Unit-level tests of runtime modules (one file per module).
mod auth;
mod call;
mod compliance;
mod config;
mod connectors;
mod context;
mod freshness;
mod generated_compiles;
mod workspace;
