//! Integration tests: real HTTP on loopback with real tokens, real processes, in-memory rmcp.

mod cli;
mod client;
mod compose;
mod egress;
mod engine;
mod harness;
mod http;
mod in_memory;
mod inspector;
mod isolation;
mod jwks;
mod kubernetes;
mod limits;
mod metrics;
mod postgres_tool;
mod procs;
mod progress;
mod python_sdk;
mod ratchet;
mod replicas;
mod scaffold;
mod scanners;
mod scopes;
mod soak;
mod stdio;
mod telemetry;
