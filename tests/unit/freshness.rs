//! `generated/`, `specs/schema/` and the root `.dockerignore` must be exactly what the specs
//! produce.
//! Locally a stale tree is rewritten (and the test fails once); under `CI` it only fails.

use std::path::Path;

#[test]
fn generated_and_schemas_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = match bulkhead_codegen::load(&root.join("specs"), root) {
        Ok(m) => m,
        Err(e) => panic!("specs/ do not build:\n{e}"),
    };
    let outputs = [
        (
            bulkhead_codegen::generate(&model),
            root.join("generated"),
            bulkhead_codegen::GENERATED_EXTS,
        ),
        (
            bulkhead_codegen::spec_schemas(),
            root.join("specs/schema"),
            &["json"][..],
        ),
        (
            bulkhead_codegen::root_files(&model),
            root.to_path_buf(),
            &[][..],
        ),
    ];
    let mut stale = Vec::new();
    for (output, dir, exts) in &outputs {
        for rel in output.diff_against(dir, exts) {
            stale.push(dir.join(rel));
        }
    }
    if stale.is_empty() {
        return;
    }
    let list: Vec<String> = stale
        .iter()
        .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    if std::env::var_os("CI").is_some() {
        panic!(
            "stale generated files: {}\nrun `cargo build` and commit generated/ and specs/schema/",
            list.join(", ")
        );
    }
    for (output, dir, exts) in &outputs {
        output
            .write_into(dir, exts)
            .expect("rewrite generated files");
    }
    panic!(
        "stale generated files were rewritten: {}\ncommit them and run the tests again",
        list.join(", ")
    );
}
