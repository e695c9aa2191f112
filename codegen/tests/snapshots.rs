//! Snapshot tests of the emitters: each spec tree under `tests/fixtures/<name>/` generates
//! exactly the files under `tests/snapshots/<name>/` (`BLESS=1` rewrites them). Also:
//! determinism, write-only-when-changed, stale-file removal, and diff locality.

use bulkhead_codegen::GENERATED_EXTS;
use bulkhead_codegen::emit::Output;
use bulkhead_codegen::spec::SpecKind;
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 4] = ["minimal", "kitchen", "connectors", "deploy"];

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn generate(fixture: &str) -> Output {
    let dir = tests_dir().join("fixtures").join(fixture);
    let model = bulkhead_codegen::load(&dir, &tests_dir())
        .unwrap_or_else(|e| panic!("fixture {fixture} must load:\n{e}"));
    bulkhead_codegen::generate(&model)
}

/// Every file under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn generated_files_match_snapshots() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    for fixture in FIXTURES {
        let out = generate(fixture);
        let snap = tests_dir().join("snapshots").join(fixture);
        if bless {
            out.write_into(&snap, GENERATED_EXTS)
                .expect("write snapshots");
            continue;
        }
        let expected = files_under(&snap);
        let actual: Vec<PathBuf> = out.files.keys().cloned().collect();
        if expected != actual {
            failures.push(format!(
                "{fixture}: generated files {actual:?} but snapshots hold {expected:?}"
            ));
        }
        for (rel, text) in &out.files {
            let old = std::fs::read_to_string(snap.join(rel)).unwrap_or_default();
            if &old != text {
                failures.push(format!(
                    "{fixture}/{}: differs from the snapshot (BLESS=1 to accept)\n--- expected\n{old}\n--- actual\n{text}",
                    rel.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_generated_file_says_it_is_generated() {
    for fixture in FIXTURES {
        for (rel, text) in &generate(fixture).files {
            // The header in the file's comment syntax: `//` (Rust), `#` (YAML, Dockerfile),
            // an HTML comment (Markdown), a `"//"` key (JSON, which has no comments).
            let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or_default();
            let (line, prefix) = match ext {
                "rs" => (0, "// @generated"),
                "json" => (1, "  \"//\": \"@generated"),
                "md" => (1, "@generated"),
                _ => (0, "# @generated"),
            };
            let got = text.lines().nth(line).unwrap_or_default();
            assert!(
                got.starts_with(&format!("{prefix} by bulkhead-codegen from fixtures/")),
                "{fixture}/{}: {got}",
                rel.display()
            );
        }
    }
}

#[test]
fn generation_is_deterministic() {
    for fixture in FIXTURES {
        assert_eq!(generate(fixture), generate(fixture), "{fixture}");
    }
}

#[test]
fn write_into_writes_only_changes_and_removes_stale_files() {
    let out = generate("connectors");
    let dir = tempfile::tempdir().expect("tempdir");
    let first = out.write_into(dir.path(), &["rs"]).expect("first write");
    let all: Vec<PathBuf> = out.files.keys().cloned().collect();
    assert_eq!(first.written, all);
    assert!(first.removed.is_empty());

    let second = out.write_into(dir.path(), &["rs"]).expect("second write");
    assert!(second.written.is_empty(), "rewrote {:?}", second.written);
    assert!(second.removed.is_empty());
    assert!(out.diff_against(dir.path(), &["rs"]).is_empty());

    // A stale module it owns goes; files of other kinds and other folders stay.
    let rust = dir.path().join("rust");
    std::fs::write(rust.join("old_server.rs"), "// stale\n").expect("write");
    std::fs::write(rust.join("README.md"), "notes\n").expect("write");
    std::fs::create_dir_all(dir.path().join("elsewhere")).expect("mkdir");
    std::fs::write(dir.path().join("elsewhere/keep.rs"), "// mine\n").expect("write");
    let edited = rust.join("ops.rs");
    std::fs::write(&edited, "// hand edit\n").expect("write");
    assert_eq!(
        out.diff_against(dir.path(), &["rs"]),
        vec![
            PathBuf::from("rust/old_server.rs"),
            PathBuf::from("rust/ops.rs")
        ]
    );

    let third = out.write_into(dir.path(), &["rs"]).expect("third write");
    assert_eq!(third.written, vec![PathBuf::from("rust/ops.rs")]);
    assert_eq!(third.removed, vec![PathBuf::from("rust/old_server.rs")]);
    assert!(!rust.join("old_server.rs").exists());
    assert!(rust.join("README.md").exists());
    assert!(dir.path().join("elsewhere/keep.rs").exists());
    assert_eq!(
        std::fs::read_to_string(&edited).expect("read"),
        out.files[Path::new("rust/ops.rs")]
    );
    let leftovers: Vec<PathBuf> = files_under(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// One line of a line diff.
#[derive(Debug, PartialEq)]
enum Edit<'a> {
    Same,
    Added(&'a str),
    Removed(&'a str),
}

/// A longest-common-subsequence line diff of `old` → `new`.
fn diff<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Edit<'a>> {
    let (n, m) = (old.len(), new.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            out.push(Edit::Same);
            (i, j) = (i + 1, j + 1);
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(Edit::Added(new[j]));
            j += 1;
        } else {
            out.push(Edit::Removed(old[i]));
            i += 1;
        }
    }
    out
}

/// Runs of consecutive changed lines.
fn hunks<'a>(edits: &[Edit<'a>]) -> Vec<Vec<&'a str>> {
    let mut out: Vec<Vec<&str>> = Vec::new();
    let mut open = false;
    for e in edits {
        match e {
            Edit::Same => open = false,
            Edit::Added(l) | Edit::Removed(l) => {
                if !open {
                    out.push(Vec::new());
                    open = true;
                }
                out.last_mut().expect("pushed").push(l);
            }
        }
    }
    out
}

#[test]
fn line_diff_finds_insertions_and_removals() {
    let old = ["a", "b", "c", "d"];
    let new = ["a", "x", "c", "d", "e"];
    let edits = diff(&old, &new);
    assert_eq!(
        edits,
        vec![
            Edit::Same,
            Edit::Added("x"),
            Edit::Removed("b"),
            Edit::Same,
            Edit::Same,
            Edit::Added("e")
        ]
    );
    assert_eq!(hunks(&edits), vec![vec!["x", "b"], vec!["e"]]);
}

#[test]
fn adding_a_tool_changes_only_that_tools_lines() {
    let spec_path = "fixtures/kitchen/servers/kitchen.yaml";
    let before = std::fs::read_to_string(tests_dir().join(spec_path)).expect("fixture");
    let new_tool = "  measure:
    description: Measure something by name.
    permission: read
    context: brief
    sensitivity: internal
    handler: rust
    params:
      what:
        type: string
        description: What to measure
";
    let after = before.replacen("  reset:\n", &format!("{new_tool}  reset:\n"), 1);
    assert_ne!(before, after, "the fixture must hold a `reset` tool");
    let generate_from = |text: &str| {
        let model = bulkhead_codegen::load_sources(vec![(SpecKind::Server, spec_path, text)])
            .unwrap_or_else(|e| panic!("{e}"));
        bulkhead_codegen::generate(&model)
    };
    let (old, new) = (generate_from(&before), generate_from(&after));
    assert_eq!(
        old.files.keys().collect::<Vec<_>>(),
        new.files.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        old.files[Path::new("rust/mod.rs")],
        new.files[Path::new("rust/mod.rs")],
        "a new handler tool does not touch the registry"
    );
    let server = Path::new("rust/kitchen.rs");
    let old_lines: Vec<&str> = old.files[server].lines().collect();
    let new_lines: Vec<&str> = new.files[server].lines().collect();
    let edits = diff(&old_lines, &new_lines);
    let removed: Vec<&Edit> = edits
        .iter()
        .filter(|e| matches!(e, Edit::Removed(_)))
        .collect();
    assert!(
        removed.is_empty(),
        "lines of other tools changed: {removed:?}"
    );
    let hunks = hunks(&edits);
    // The argument struct, the tool table row, the trait method, the dispatch arm.
    assert_eq!(hunks.len(), 4, "{hunks:#?}");
    for h in &hunks {
        assert!(
            h.iter()
                .any(|l| l.contains("measure") || l.contains("Measure")),
            "a changed block that is not about the new tool: {h:#?}"
        );
        assert!(
            !h.iter().any(|l| ["echo_all", "reset", "fetch-page.v2"]
                .iter()
                .any(|other| l.contains(other))),
            "a changed block mentions another tool: {h:#?}"
        );
    }
    let added = edits.iter().filter(|e| matches!(e, Edit::Added(_))).count();
    assert_eq!(added, new_lines.len() - old_lines.len());
}

/// `generated/` holds only what the generator writes: a stray file anywhere under it (a
/// `compose/.env`, which compose would read; a file in a folder of its own) is removed by the
/// build, so the freshness check sees a deletion and fails (issue 34).
#[test]
fn a_folder_owned_whole_keeps_only_generated_files() {
    let out = generate("deploy");
    let dir = tempfile::tempdir().expect("tempdir");
    out.write_into_whole(dir.path()).expect("first write");
    let compose = dir.path().join("compose");
    assert!(compose.is_dir());
    std::fs::write(compose.join(".env"), "MCP_SERVER_TIME=/tmp/evil\n").expect("write");
    std::fs::create_dir_all(dir.path().join("extra")).expect("mkdir");
    std::fs::write(dir.path().join("extra/notes.txt"), "x\n").expect("write");
    let report = out.write_into_whole(dir.path()).expect("second write");
    assert_eq!(
        report.removed,
        vec![
            PathBuf::from("compose/.env"),
            PathBuf::from("extra/notes.txt")
        ]
    );
    assert!(!compose.join(".env").exists());
    assert!(report.written.is_empty());
}

/// With `token_service.login.device_client_id` in `config.yaml`, `bulkhead connect` signs the
/// user in: the desktop entries carry no token (and VS Code prompts for none).
#[test]
fn desktop_entries_carry_no_token_when_connect_signs_in() {
    let dir = tests_dir().join("fixtures").join("deploy");
    let mut model = bulkhead_codegen::load(&dir, &tests_dir()).expect("fixture loads");
    let plain = bulkhead_codegen::generate(&model);
    for key in ["device_client_id", "native_client_id"] {
        model.config = Some(serde_json::json!({
            "token_service": {"login": {key: "bulkhead-connect"}}
        }));
        let signing_in = bulkhead_codegen::generate(&model);
        for client in ["claude_desktop", "vscode", "cursor"] {
            let rel = PathBuf::from(format!("clients/prod.up.{client}.json"));
            assert!(plain.files[&rel].contains("BULKHEAD_TOKEN"), "{client}");
            let text = &signing_in.files[&rel];
            assert!(
                !text.contains("BULKHEAD_TOKEN") && !text.contains("bulkhead_token"),
                "{key}: {text}"
            );
            assert!(text.contains("signs you in"), "{text}");
        }
    }
}

/// `tests/fixture_kind.rs` is compiled in whenever the vocabulary has the fixture kind: a test
/// command that turns on another crate's feature but not this one's would skip it silently.
#[test]
fn the_fixture_kind_tests_run_whenever_the_vocabulary_has_the_kind() {
    let vocab_has_it = bulkhead_vocab::connector::ConnectorKind::ALL
        .iter()
        .any(|k| k.is_fixture());
    assert_eq!(
        cfg!(feature = "fixture-kind"),
        vocab_has_it,
        "run the tests with `--features failpoints,fixture-kind` (every crate's feature)"
    );
}
