//! Unit-level tests of runtime modules (one file per module).
mod workspace;
