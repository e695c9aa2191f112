//! Emitters: each reads the model and adds files to an [`Output`]; writing happens once, only
//! where bytes changed.

pub mod deploy;
pub mod input_schema;
pub mod owners;
pub mod yaml_text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Files to write, by path relative to an output folder, in sorted order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Relative path → contents.
    pub files: BTreeMap<PathBuf, String>,
}

/// What writing an [`Output`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Files whose bytes changed (or were new).
    pub written: Vec<PathBuf>,
    /// Stale files removed from folders this output owns.
    pub removed: Vec<PathBuf>,
}

impl Output {
    /// Adds a file.
    pub fn add(&mut self, path: impl Into<PathBuf>, contents: String) {
        self.files.insert(path.into(), contents);
    }

    /// The files whose path starts with `folder` (e.g. `rust/`, what the crate compiles).
    pub fn only_under(&self, folder: &str) -> Output {
        Output {
            files: self
                .files
                .iter()
                .filter(|(p, _)| p.starts_with(folder))
                .map(|(p, c)| (p.clone(), c.clone()))
                .collect(),
        }
    }

    /// Writes every file under `dir` whose bytes differ; removes files with one of `owned_exts`
    /// inside the sub-folders this output writes to that it no longer produces.
    pub fn write_into(&self, dir: &Path, owned_exts: &[&str]) -> std::io::Result<WriteReport> {
        let mut report = WriteReport::default();
        for (rel, contents) in &self.files {
            let path = dir.join(rel);
            if std::fs::read(&path).ok().as_deref() == Some(contents.as_bytes()) {
                continue;
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let tmp = path.with_extension("tmp~");
            std::fs::write(&tmp, contents)?;
            std::fs::rename(&tmp, &path)?;
            report.written.push(rel.clone());
        }
        let folders: std::collections::BTreeSet<PathBuf> = self
            .files
            .keys()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        for folder in folders {
            let Ok(entries) = std::fs::read_dir(dir.join(&folder)) else {
                continue;
            };
            for entry in entries.flatten() {
                let rel = folder.join(entry.file_name());
                let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or_default();
                if entry.path().is_file()
                    && owned_exts.contains(&ext)
                    && !self.files.contains_key(&rel)
                {
                    std::fs::remove_file(entry.path())?;
                    report.removed.push(rel);
                }
            }
        }
        Ok(report)
    }

    /// [`write_into`](Self::write_into) for a folder this output owns whole (`generated/`):
    /// every other file anywhere under `dir` is removed, whatever its name, so the folder holds
    /// only what the generator writes (a stray `compose/.env`, which compose would read, fails
    /// the freshness check as a deletion).
    pub fn write_into_whole(&self, dir: &Path) -> std::io::Result<WriteReport> {
        let mut report = self.write_into(dir, &[])?;
        let mut stack = vec![PathBuf::new()];
        while let Some(folder) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(dir.join(&folder)) else {
                continue;
            };
            for entry in entries.flatten() {
                let rel = folder.join(entry.file_name());
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(rel);
                } else if !self.files.contains_key(&rel) {
                    std::fs::remove_file(entry.path())?;
                    report.removed.push(rel);
                }
            }
        }
        report.removed.sort();
        Ok(report)
    }

    /// Files under `dir` that differ from this output (missing, changed, or stale extras).
    pub fn diff_against(&self, dir: &Path, owned_exts: &[&str]) -> Vec<PathBuf> {
        let mut stale: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(rel, contents)| {
                std::fs::read(dir.join(rel)).ok().as_deref() != Some(contents.as_bytes())
            })
            .map(|(rel, _)| rel.clone())
            .collect();
        let folders: std::collections::BTreeSet<PathBuf> = self
            .files
            .keys()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        for folder in folders {
            let Ok(entries) = std::fs::read_dir(dir.join(&folder)) else {
                continue;
            };
            for entry in entries.flatten() {
                let rel = folder.join(entry.file_name());
                let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or_default();
                if owned_exts.contains(&ext) && !self.files.contains_key(&rel) {
                    stale.push(rel);
                }
            }
        }
        stale.sort();
        stale
    }
}

/// The header every generated file starts with, in the file's comment syntax.
pub fn header(comment: &str, sources: &[&str]) -> String {
    format!(
        "{comment} @generated by bulkhead-codegen from {}. Do not edit.\n{comment} Regenerate with `cargo build` (specs/ → generated/); CI fails when this file is stale.\n",
        sources.join(", ")
    )
}
