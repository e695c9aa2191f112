//! Hand-written Rust handlers for `handler: rust` tools, one module per server.

pub mod template;
