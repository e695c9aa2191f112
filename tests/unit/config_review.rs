//! The review reads `config.yaml` through the engine's own types: lang's copy of the schema is
//! the engine's, and every setting in it has a review class.

/// lang's copy of the configuration schema (what the review reads) is `bulkhead::config::schema()`
/// (rewrite it with `BLESS=1`).
#[test]
fn the_config_schema_copy_of_the_review_is_the_engines() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("lang/src/review/config.schema.json");
    let want = format!(
        "{}\n",
        serde_json::to_string_pretty(&bulkhead::config::schema()).unwrap()
    );
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run `BLESS=1 cargo test --test unit -- config_schema`",
        path.display()
    );
    assert_eq!(want, bulkhead_codegen::review::CONFIG_SCHEMA);
}

/// Every setting the runtime reads has a review class (`#[schemars(extend("x-review" = …))]` on
/// its field): a key added without one fails here, so the review cannot fall behind the types.
#[test]
fn every_config_setting_has_a_review_class() {
    let settings = bulkhead_codegen::review::schema_settings(&bulkhead::config::schema());
    assert!(settings.len() > 100, "{settings:?}");
    let missing: Vec<&String> = settings
        .iter()
        .filter(|(_, class)| class.is_none())
        .map(|(path, _)| path)
        .collect();
    assert!(
        missing.is_empty(),
        "settings without a review class (add #[schemars(extend(\"x-review\" = …))]): {missing:?}"
    );
}
