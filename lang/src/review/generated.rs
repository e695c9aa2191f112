//! The review by the base's rules: what the base revision's generator and vocabulary make of this
//! change's specs, compared with the `generated/` this change commits. A change to `vocab`, the
//! generator or the review itself shows here, however the policy comparison (which runs this
//! change's rules on both sides) sees it.

use super::rule::Rule;
use super::rules::Weakening;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let path = rel.join(e.file_name());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(_) => {
                    out.insert(path);
                }
                Err(_) => {}
            }
        }
    }
    out
}

/// One `rules-changed` weakening per file that differs between `committed` (this change's
/// `generated/`) and `by_base` (what the base's rules generate from this change's specs).
pub fn rules_changed(committed: &Path, by_base: &Path) -> Vec<Weakening> {
    let (have, want) = (files(committed), files(by_base));
    let mut out = Vec::new();
    for rel in have.union(&want) {
        let change = match (have.contains(rel), want.contains(rel)) {
            (true, false) => "the base's rules do not make this file of these specs",
            (false, true) => "the base's rules make this file of these specs; this change has none",
            _ if std::fs::read(committed.join(rel)).ok()
                != std::fs::read(by_base.join(rel)).ok() =>
            {
                "differs from what the base's rules make of these specs (vocab, the generator or the review changed)"
            }
            _ => continue,
        };
        out.push(Weakening {
            rule: Rule::RulesChanged,
            subject: format!("generated/{}", rel.display()),
            change: change.to_string(),
            file: "generated/".to_string(),
        });
    }
    out
}
