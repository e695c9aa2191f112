//! Integration tests: real HTTP, real processes, real namespaces.
