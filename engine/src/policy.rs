//! The three declared properties of every tool (permission, sensitivity, and the network mode
//! they imply), from the shared vocabulary crate `bulkhead-vocab`, where their rules live.

pub use bulkhead_vocab::{NetworkMode, Permission, Sensitivity, meta};
