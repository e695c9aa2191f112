//! The fixture of ARCHITECTURE.md's recipe for a new connector kind: the test-only `echo` kind
//! (feature `fixture-kind`) was added by following the recipe, and a spec over it passes
//! `check` and generates; its settings are typed like every kind's, and bad ones are refused.
#![cfg(feature = "fixture-kind")]

use bulkhead_codegen::model::OperationBody;
use bulkhead_vocab::connector::{ConnectorKind, Settings};
use std::path::Path;

fn tests_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
}

#[test]
fn a_spec_over_the_fixture_kind_passes_check_and_generates() {
    let model = bulkhead_codegen::load(&tests_dir().join("fixture_kind"), tests_dir())
        .unwrap_or_else(|e| panic!("the fixture kind's specs must pass check:\n{e}"));
    let parrot = model
        .connector("parrot")
        .expect("the connector is in the model");
    assert_eq!(parrot.kind, ConnectorKind::Echo);
    match &parrot.settings {
        Settings::Echo(s) => assert_eq!(s.prefix.as_deref(), Some("parrot says: ")),
        other => panic!("typed as {:?}", other.kind()),
    }
    assert!(matches!(parrot.operations[0].body, OperationBody::Echo));
    let out = bulkhead_codegen::generate(&model);
    let rust = out
        .files
        .iter()
        .find(|(path, _)| path.ends_with("rust/mod.rs"))
        .map(|(_, text)| text.clone())
        .expect("Rust is generated");
    assert!(rust.contains("kind: bh::ConnectorKind::Echo"), "{rust}");
    assert!(rust.contains(r##"body: r#""echo""#"##), "{rust}");
}

#[test]
fn the_fixture_kinds_settings_are_typed() {
    let bad = ConnectorKind::Echo.settings(serde_json::json!({"prefix": "x", "volume": 11}));
    let err = bad.expect_err("an unknown setting is refused");
    assert!(err.to_string().contains("unknown field `volume`"), "{err}");
    // Left out of the published schema: `specs/schema/` is the same whichever features built it.
    let schema = bulkhead_codegen::schema::schema_of(bulkhead_codegen::spec::SpecKind::Connector);
    assert!(!schema.to_string().contains("EchoSettings"));
}
