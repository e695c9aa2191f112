//! Integration tests: real HTTP on loopback with real tokens, real processes, in-memory rmcp.

mod audit_values;
mod cli;
mod client;
mod compose;
mod cross_server;
mod direct;
mod egress;
mod engine;
mod harness;
mod http;
mod in_memory;
mod inspector;
mod isolation;
mod jail_egress;
mod jwks;
mod kubernetes;
mod limits;
mod metrics;
mod policy_review;
mod postgres_tool;
mod procs;
mod progress;
mod python_sdk;
mod ratchet;
mod replicas;
mod sandbox;
mod scaffold;
mod scanners;
mod scopes;
mod soak;
mod stdio;
mod telemetry;
#[path = "../support/tls.rs"]
mod tls;
mod upstream;
