//! The example deployment: the servers `build.rs` generates from `specs/`, and their handlers.
//! Built on the engine exactly as a user's project is (`bulkhead init` writes the same shape).

pub mod handlers;

/// The servers generated from `specs/` (compiled from `OUT_DIR`, mirrored in `generated/rust/`).
pub mod servers {
    include!(concat!(env!("OUT_DIR"), "/rust/mod.rs"));
}
