//! `secret-committed`: the files a change adds or edits, read for key material with the same
//! credential rules inspection uses ([`bulkhead::inspect`]) and by the names key files have, so a
//! credential never enters the repository's history without a person accepting it by name.

use bulkhead_lang::review::{Rule, Weakening};
use std::path::Path;

/// Files larger than this are not read (a credential file is small; a data dump is not code).
const MAX_BYTES: u64 = 4 << 20;

/// Whether a file's name says it holds a private key.
fn key_file_name(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".key")
        || name.ends_with(".p12")
        || name.ends_with(".pfx")
        || ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"].contains(&name)
}

/// The files of the project under `under` (relative to `root`) that differ from `commit` as
/// `filter` selects (`AMR`: added, edited, renamed; `D`: removed too) or are new (untracked,
/// not ignored).
pub(super) fn changed_files(
    root: &Path,
    commit: &str,
    filter: &str,
    under: &str,
) -> anyhow::Result<Vec<String>> {
    let filter = format!("--diff-filter={filter}");
    let list = |args: &[&str]| -> anyhow::Result<Vec<String>> {
        Ok(String::from_utf8(super::git::git(root, args)?)?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect())
    };
    let mut files = list(&[
        "diff",
        "--relative",
        "--name-only",
        &filter,
        commit,
        "--",
        under,
    ])?;
    files.extend(list(&[
        "ls-files",
        "--others",
        "--exclude-standard",
        "--",
        under,
    ])?);
    files.sort();
    files.dedup();
    Ok(files)
}

/// The first 8 hex digits of the SHA-256 of `value`.
fn digest(value: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(value)
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every `secret-committed` weakening of the change from `commit` to the working tree.
pub(super) fn secrets_committed(root: &Path, commit: &str) -> anyhow::Result<Vec<Weakening>> {
    let rules = bulkhead::inspect::Rules::get()?;
    let mut out = Vec::new();
    for path in changed_files(root, commit, "AMR", ".")? {
        let weakening = |change: String| Weakening {
            rule: Rule::SecretCommitted,
            subject: path.clone(),
            change,
            file: path.clone(),
        };
        if key_file_name(&path) {
            out.push(weakening("a key file, by its name".into()));
            continue;
        }
        let file = root.join(&path);
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if !meta.is_file() || meta.len() > MAX_BYTES {
            continue;
        }
        let bytes = std::fs::read(&file)?;
        // Each value is named by the start of its SHA-256, so an acknowledgement covers that
        // value only: another credential later written into the same file is a new line.
        let mut found: Vec<(&str, String)> = rules
            .find(&bytes)
            .iter()
            .map(|h| (h.rule, digest(&bytes[h.start..h.end])))
            .collect();
        found.sort_unstable();
        found.dedup();
        // What the base's version of the file already held was another change's to accept:
        // only values this change brings are named.
        let before: Vec<(&str, String)> =
            super::git::git(root, &["show", &format!("{commit}:./{path}")])
                .map(|old| {
                    rules
                        .find(&old)
                        .iter()
                        .map(|h| (h.rule, digest(&old[h.start..h.end])))
                        .collect()
                })
                .unwrap_or_default();
        found.retain(|f| !before.contains(f));
        for (rule, value) in found {
            out.push(weakening(format!(
                "holds what rule `{rule}` finds (value sha256 {value}…)"
            )));
        }
    }
    Ok(out)
}
