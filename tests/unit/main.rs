//! Unit-level tests of runtime modules (one file per module).
mod architecture;
mod audit;
mod auth;
mod call;
mod config;
mod config_review;
mod connectors;
mod context;
mod freshness;
mod generated_compiles;
#[path = "snapshots/handlers.rs"]
mod handlers;
mod inspect;
mod snapshots;
mod state;
mod workspace;
