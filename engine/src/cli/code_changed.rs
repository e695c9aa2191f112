//! `code-changed`: the project's own Rust under `src/` (handler modules, and anything the
//! generated servers call) runs tools and admits calls, and no spec describes it, so each file a
//! change adds, edits or removes there is a weakening a person reads and accepts, bound to the
//! file's content on both sides.

use bulkhead_lang::review::{Rule, Weakening};
use std::path::Path;

/// The folder of the project's own code.
const CODE: &str = "src";

/// The git blob id of `path` at `commit` (short), or `none` when it is not there.
fn blob_at(root: &Path, commit: &str, path: &str) -> String {
    super::git::git(
        root,
        &["rev-parse", "--verify", "-q", &format!("{commit}:./{path}")],
    )
    .ok()
    .and_then(|b| String::from_utf8(b).ok())
    .map_or_else(
        || "none".to_string(),
        |s| s.trim().chars().take(12).collect(),
    )
}

/// The git blob id of the working tree's `path` (short), or `removed`.
fn blob_now(root: &Path, path: &str) -> String {
    if !root.join(path).is_file() {
        return "removed".into();
    }
    super::git::git(root, &["hash-object", "--", path])
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .map_or_else(
            || "unreadable".to_string(),
            |s| s.trim().chars().take(12).collect(),
        )
}

/// Every `code-changed` weakening of the change from `commit` to the working tree.
pub(super) fn code_changed(root: &Path, commit: &str) -> anyhow::Result<Vec<Weakening>> {
    let mut out = Vec::new();
    for path in super::committed::changed_files(root, commit, "AMRD", CODE)? {
        if !path.ends_with(".rs") {
            continue;
        }
        out.push(Weakening {
            rule: Rule::CodeChanged,
            subject: path.clone(),
            change: format!(
                "{} → {}: code that runs a tool or admits a call, which the policy does not describe; a person must read it",
                blob_at(root, commit, &path),
                blob_now(root, &path)
            ),
            file: path,
        });
    }
    Ok(out)
}
