//! Integration tests: real HTTP on loopback with real tokens, real processes, in-memory rmcp.

mod cli;
mod compose;
mod harness;
mod http;
mod in_memory;
mod python_sdk;
mod stdio;
