//! The servers generated from `specs/` (compiled from `OUT_DIR`, mirrored in `generated/rust/`).

include!(concat!(env!("OUT_DIR"), "/rust/mod.rs"));
