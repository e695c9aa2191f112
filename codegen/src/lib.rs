//! Bulkhead spec pipeline: load → validate → model → emit.
