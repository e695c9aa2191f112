//! `ARCHITECTURE.md` names only what exists: every repository path it writes in backticks is a
//! file or folder of the checkout (a module moved or renamed without the map fails here).

#[test]
fn every_path_the_map_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let roots = [
        "src/",
        "engine/",
        "codegen/",
        "lang/",
        "vocab/",
        "tests/",
        "specs/",
        "generated/",
        "docs/",
        "bench/",
        "scripts/",
    ];
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, part) in map.split('`').enumerate() {
        // Odd parts are inside backticks.
        if i % 2 == 0 || !roots.iter().any(|r| part.starts_with(r)) {
            continue;
        }
        if part.contains(char::is_whitespace) || part.contains('*') || part.contains('<') {
            continue;
        }
        named += 1;
        if !root.join(part).exists() {
            missing.push(part.to_string());
        }
    }
    assert!(
        named > 50,
        "the map names {named} paths: is it the code map?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
    for module in [
        "src/jail/",
        "vocab/src/connector/",
        "lang/src/review/rule.rs",
    ] {
        assert!(map.contains(module), "the map says nothing of `{module}`");
    }
}
