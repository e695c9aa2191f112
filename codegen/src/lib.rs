//! Bulkhead spec pipeline: load → validate (JSON Schema, then semantic checks) → model → emit.
//!
//! `build.rs` calls [`Builder::run`]; tests and `bulkhead check` call [`load`] and [`generate`].
//! This crate never links the runtime: generated code is the bridge.

pub mod check;
pub mod diag;
pub mod emit;
mod handlers;
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
    ) {
        Ok(model) if errors.is_empty() => Ok(model),
        Ok(_) => Err(Diagnostics(errors).sorted()),
        Err(mut more) => {
            errors.append(&mut more);
            Err(Diagnostics(errors).sorted())
        }
    }
}

/// Every generated artifact for `model`, relative to `generated/`.
pub fn generate(model: &model::Model) -> Output {
    let mut out = Output::default();
    emit::rust::emit(model, &mut out);
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

/// The files [`generate`]'s model puts at the repository's root (`.dockerignore`, the image's
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

/// Extensions of the files [`generate`] owns in `generated/`: a file with one of them in a folder
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

pub use handlers::check_handler_modules;

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

/// What a build did.
#[derive(Debug, Default)]
pub struct Report {
    /// Files rewritten in the mirror and schema folders (empty on a no-op build).
    pub mirrored: Vec<PathBuf>,
    /// Why the mirror could not be written, if it could not (the build still succeeds).
    pub mirror_warning: Option<String>,
    /// Spec files read.
    pub inputs: Vec<PathBuf>,
    /// Warnings about the specs (the build goes on).
    pub warnings: Vec<diag::Diagnostic>,
}

/// Drives a build: `specs/` → `OUT_DIR` (compiled) and `generated/` + `specs/schema/` (reviewed).
#[derive(Clone, Debug)]
pub struct Builder {
    root: PathBuf,
    out_dir: PathBuf,
    mirror: bool,
}

impl Builder {
    /// A builder for the project at `root` (which holds `specs/` and `generated/`).
    pub fn new(root: impl Into<PathBuf>, out_dir: impl Into<PathBuf>) -> Builder {
        Builder {
            root: root.into(),
            out_dir: out_dir.into(),
            mirror: true,
        }
    }

    /// Whether to mirror into `generated/` and `specs/schema/` (default: yes).
    pub fn mirror(mut self, yes: bool) -> Builder {
        self.mirror = yes;
        self
    }

    /// Runs the pipeline. Spec errors come back as [`BuildError::Specs`].
    pub fn run(&self) -> Result<Report, BuildError> {
        let specs = self.root.join("specs");
        let model = load(&specs, &self.root)?;
        check_handler_modules(&self.root, &model)?;
        let generated = generate(&model);
        generated
            .only_under("rust")
            .write_into(&self.out_dir, &["rs"])
            .map_err(|source| BuildError::Write {
                path: self.out_dir.clone(),
                source,
            })?;
        let mut report = Report {
            warnings: model.warnings.clone(),
            ..Report::default()
        };
        for kind in spec::SpecKind::ALL {
            report
                .inputs
                .extend(load::yaml_files(&specs.join(kind.folder()))?);
        }
        if self.mirror {
            let mirrored = generated
                .write_into_whole(&self.root.join("generated"))
                .and_then(|mut r| {
                    let root = root_files(&model).write_into(&self.root, &[])?;
                    r.written
                        .extend(root.written.into_iter().map(|p| Path::new("..").join(p)));
                    Ok(r)
                })
                .and_then(|mut r| {
                    spec_schemas()
                        .write_into(&specs.join("schema"), &["json"])
                        .map(|s| {
                            r.written.extend(
                                s.written
                                    .into_iter()
                                    .map(|p| Path::new("../specs/schema").join(p)),
                            );
                            r
                        })
                });
            match mirrored {
                Ok(r) => report.mirrored = r.written,
                Err(e) => {
                    report.mirror_warning =
                        Some(format!("could not update generated/ or specs/schema/: {e}"))
                }
            }
        }
        Ok(report)
    }
}
