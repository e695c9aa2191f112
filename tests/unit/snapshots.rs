//! The generated Rust of the generator's snapshot fixtures (`codegen/tests/snapshots/*/rust/`)
//! builds against the runtime: `codegen/tests/snapshots.rs` compares those files byte for byte,
//! and this module compiles them (as progenitor keeps its snapshot outputs in a crate), with
//! handlers for every handler trait they declare (`snapshots/handlers.rs`, mounted as this
//! binary's `crate::handlers`).
//!
//! A snapshot's `mod.rs` includes its servers from `OUT_DIR`, where the real build writes the
//! servers of `specs/`. Inside each fixture module a local `env!` answers `"OUT_DIR"` with that
//! fixture's snapshot folder, so the files compile exactly as they were generated.

#![allow(dead_code)]

pub mod minimal {
    macro_rules! env {
        ("OUT_DIR") => {
            concat!(
                std::env!("CARGO_MANIFEST_DIR"),
                "/codegen/tests/snapshots/minimal"
            )
        };
    }
    include!("../../codegen/tests/snapshots/minimal/rust/mod.rs");
}

pub mod kitchen {
    macro_rules! env {
        ("OUT_DIR") => {
            concat!(
                std::env!("CARGO_MANIFEST_DIR"),
                "/codegen/tests/snapshots/kitchen"
            )
        };
    }
    include!("../../codegen/tests/snapshots/kitchen/rust/mod.rs");
}

pub mod connectors {
    macro_rules! env {
        ("OUT_DIR") => {
            concat!(
                std::env!("CARGO_MANIFEST_DIR"),
                "/codegen/tests/snapshots/connectors"
            )
        };
    }
    include!("../../codegen/tests/snapshots/connectors/rust/mod.rs");
}

pub mod deploy {
    macro_rules! env {
        ("OUT_DIR") => {
            concat!(
                std::env!("CARGO_MANIFEST_DIR"),
                "/codegen/tests/snapshots/deploy"
            )
        };
    }
    include!("../../codegen/tests/snapshots/deploy/rust/mod.rs");
}

/// A generated registry: its servers, and the function that builds one by name.
type Registry = (
    &'static [&'static bulkhead::serverdef::ServerDef],
    fn(&str) -> Option<bulkhead::codegen::Server>,
);

/// Every fixture's registry names its servers and builds each of them.
#[test]
fn every_snapshot_registry_builds_its_servers() {
    let registries: [Registry; 4] = [
        (minimal::SERVERS, minimal::server),
        (kitchen::SERVERS, kitchen::server),
        (connectors::SERVERS, connectors::server),
        (deploy::SERVERS, deploy::server),
    ];
    let mut names = Vec::new();
    for (servers, build) in registries {
        assert!(!servers.is_empty());
        for s in servers {
            let built = build(s.name).unwrap_or_else(|| panic!("`{}` builds", s.name));
            assert_eq!(built.def.name, s.name);
            names.push(s.name);
        }
        assert!(build("no-such-server").is_none());
    }
    names.sort();
    assert_eq!(names, ["hello", "kitchen", "notes", "ops", "vault"]);
}
