//! Integration tests: real HTTP on loopback with real tokens, real processes.

mod harness;
mod http;
