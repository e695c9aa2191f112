//! `ARCHITECTURE.md` names only what exists and everything there is: every repository path it
//! writes in backticks is a file or folder of the checkout (a module moved or renamed without the
//! map fails here), and every module folder of every crate is named in it.

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
    // The other direction: every module folder of every crate is named, as `folder/`.
    let mut unnamed = Vec::new();
    for krate in ["engine/src", "lang/src", "codegen/src", "vocab/src"] {
        let mut stack = vec![root.join(krate)];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                }
            }
            let rel = dir.strip_prefix(root).unwrap().display().to_string();
            if dir != root.join(krate) && !map.contains(&format!("`{rel}/")) {
                unnamed.push(rel);
            }
        }
    }
    unnamed.sort();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md says nothing of these module folders: {unnamed:?}"
    );
    for krate in ["engine/", "lang/", "codegen/", "vocab/"] {
        assert!(
            map.contains(&format!("### `{krate}`")),
            "the map has no section for the crate `{krate}`"
        );
    }
}
