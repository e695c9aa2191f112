//! Bulkhead's spec language: load → validate (JSON Schema, then semantic checks) → model, the
//! review of one model against another, and the deployment files a model describes.
//!
//! Both sides read specs through this crate: the generator (`bulkhead-codegen`, a project's
//! build-dependency) and the engine's commands that work on specs (`check`, `tools`, `new`,
//! `import`, `up`). It holds no Rust emitter and links neither syn nor the runtime.

pub mod check;
pub mod diag;
pub mod emit;
pub mod load;
pub mod model;
pub mod review;
pub mod schema;
pub mod source;
pub mod spec;
pub mod sql;
pub mod suggest;
pub mod vars;
pub mod workspace;
pub mod yaml;

use diag::Diagnostics;
use emit::Output;
use std::path::{Path, PathBuf};

/// Loads and checks every spec under `specs_dir` (paths shown relative to `root`), with
/// `root/config.yaml` when there is one (read as YAML only; the runtime checks its meaning).
pub fn load(specs_dir: &Path, root: &Path) -> Result<model::Model, BuildError> {
    let (set, mut errors) = load::load_dir(specs_dir, root)?;
    let config_path = root.join("config.yaml");
    let config = if config_path.is_file() {
        let file =
            source::SourceFile::read(&config_path, "config.yaml".into()).map_err(|source| {
                load::LoadError::Io {
                    path: config_path.clone(),
                    source,
                }
            })?;
        match yaml::parse(&file) {
            Ok(node) => Some(node.to_json()),
            Err(mut d) => {
                errors.append(&mut d);
                None
            }
        }
    } else {
        None
    };
    let workspace = workspace::Workspace::read(root).ok();
    let tag = workspace
        .as_ref()
        .map_or_else(|| package_version(root), |w| w.version.clone());
    match check::check(
        &set.connectors,
        &set.servers,
        &set.deployments,
        &set.declared,
        &tag,
        config.as_ref(),
    ) {
        Ok(model) if errors.is_empty() => Ok(model::Model {
            config,
            workspace,
            // An unreadable acknowledgements file fails the review, which reports it.
            owners: review::Acks::load(root)
                .map(|a| a.owners)
                .unwrap_or_default(),
            ..model
        }),
        Ok(_) => Err(BuildError::Specs(Diagnostics(errors).sorted())),
        Err(mut more) => {
            errors.append(&mut more);
            Err(BuildError::Specs(Diagnostics(errors).sorted()))
        }
    }
}

/// The root package's version when `cargo metadata` cannot run (a revision under review checked
/// out without its lock, a machine without cargo): `version = "…"` of `[package]` in
/// `root/Cargo.toml`, else this generator's version.
fn package_version(root: &Path) -> String {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some(v) = line.strip_prefix("version")
            && let Some(v) = v.trim_start().strip_prefix('=')
        {
            let v = v.trim().trim_matches('"');
            if !v.is_empty() && !v.contains('{') {
                return v.to_string();
            }
        }
    }
    env!("CARGO_PKG_VERSION").to_string()
}

/// One line saying what the specs hold (`specs ok: 3 server(s), …`).
pub fn summary(model: &model::Model) -> String {
    let tools: usize = model.servers.iter().map(|s| s.tools.len()).sum();
    format!(
        "specs ok: {} server(s), {} tool(s), {} connector(s), {} deployment(s)",
        model.servers.len(),
        tools,
        model.connectors.len(),
        model.deployments.len()
    )
}

/// Loads specs from memory (kind, display path, text); for tests and tools.
pub fn load_sources(
    sources: Vec<(spec::SpecKind, &str, &str)>,
) -> Result<model::Model, Diagnostics> {
    let files = sources
        .into_iter()
        .map(|(k, path, text)| (k, source::SourceFile::in_memory(path, text)))
        .collect();
    let (set, mut errors) = load::load_sources(files);
    match check::check(
        &set.connectors,
        &set.servers,
        &set.deployments,
        &set.declared,
        env!("CARGO_PKG_VERSION"),
        None,
    ) {
        Ok(model) if errors.is_empty() => Ok(model),
        Ok(_) => Err(Diagnostics(errors).sorted()),
        Err(mut more) => {
            errors.append(&mut more);
            Err(Diagnostics(errors).sorted())
        }
    }
}

/// Every generated artifact for `model` but the Rust (which `bulkhead-codegen` adds): the
/// deployment files and `POLICY.md`, relative to `generated/`.
pub fn deployment_files(model: &model::Model) -> Output {
    let mut out = Output::default();
    emit::deploy::emit(model, &mut out);
    let mut sources: Vec<&str> = model
        .connectors
        .iter()
        .map(|c| c.source.as_str())
        .chain(model.servers.iter().map(|s| s.source.as_str()))
        .chain(model.deployments.iter().map(|d| d.source.as_str()))
        .collect();
    sources.sort();
    if model.config.is_some() {
        sources.push("config.yaml");
    }
    out.add(
        "POLICY.md",
        review::policy_table(&review::resolve(model), &sources),
    );
    out
}

/// The files a model puts at the repository's root (`.dockerignore`, the image's
/// build context; `.github/CODEOWNERS`, who approves the review), relative to the root; written
/// beside `generated/` and kept fresh like it.
pub fn root_files(model: &model::Model) -> Output {
    let mut out = Output::default();
    emit::deploy::docker::root_files(model, &mut out);
    if let Some(text) = emit::owners::codeowners(model) {
        out.add(".github/CODEOWNERS", text);
    }
    out
}

/// Extensions of the files the generator owns in `generated/`: a file with one of them in a folder
/// it writes to, that it no longer produces, is stale (removed by the build, flagged by tests).
pub const GENERATED_EXTS: &[&str] = &["rs", "yaml", "json", "md", "dockerignore"];

/// The JSON Schemas of the spec kinds, relative to `specs/schema/`.
pub fn spec_schemas() -> Output {
    let mut out = Output::default();
    for kind in spec::SpecKind::ALL {
        let mut text =
            serde_json::to_string_pretty(&schema::schema_of(kind)).expect("schema is JSON");
        text.push('\n');
        out.add(format!("{}.schema.json", kind.schema_name()), text);
    }
    out
}

/// Why a build could not produce servers.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The specs have errors (rendered like rustc).
    #[error("{0}")]
    Specs(Diagnostics),
    /// A spec folder could not be read.
    #[error(transparent)]
    Load(#[from] load::LoadError),
    /// An output folder could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}
