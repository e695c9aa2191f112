//! Bulkhead's generator, a project's build-dependency: `specs/` → the project's Rust servers in
//! `OUT_DIR`, and the reviewed mirror in `generated/`, `specs/schema/` and the root files.
//!
//! A project's `build.rs` is one call, [`build`]. The spec language it reads (load, check, model,
//! review, the deployment files) is `bulkhead-lang`, re-exported here; what this crate adds is
//! the Rust emitter, the check of the handler modules, and the [`Builder`] that writes files.
//! It never links the engine: generated code is the bridge.

pub use bulkhead_lang::{
    BuildError, GENERATED_EXTS, check, deployment_files, diag, load, load_sources, model, review,
    root_files, schema, source, spec, spec_schemas, sql, suggest, summary, vars, workspace, yaml,
};

/// The emitters: the spec language's (deployment files) and this crate's Rust.
pub mod emit {
    pub use bulkhead_lang::emit::*;
    pub mod rust;
}

mod handlers;

pub use handlers::check_handler_modules;

use emit::Output;
use std::path::{Path, PathBuf};

/// Every generated artifact for `model`, relative to `generated/`: the Rust, the deployment
/// files and `POLICY.md`.
pub fn generate(model: &model::Model) -> Output {
    let mut out = Output::default();
    emit::rust::emit(model, &mut out);
    out.files.extend(deployment_files(model).files);
    out
}

/// What a project's `build.rs` calls: runs the [`Builder`] on the package being built (its
/// `specs/`, `config.yaml` and `src/handlers/`), tells cargo what to watch, and prints warnings,
/// or the spec diagnostics (rendered like rustc) and stops the build.
pub fn build() {
    for watched in [
        "specs/servers",
        "specs/connectors",
        "specs/deployments",
        // Its identity rules and limits are part of generated/POLICY.md.
        "config.yaml",
        // Its `owners:` become .github/CODEOWNERS.
        "specs/policy-acks.yaml",
        "src/handlers",
    ] {
        println!("cargo::rerun-if-changed={watched}");
    }
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    match Builder::new(root, out).run() {
        Ok(report) => {
            if let Some(warning) = report.mirror_warning {
                println!("cargo::warning={warning}");
            }
            for w in report.warnings {
                println!("cargo::warning={} ({})", w.message, w.location());
            }
        }
        Err(e) => {
            eprintln!("{e}");
            println!(
                "cargo::error=bulkhead: specs/ has errors: the diagnostics are below; `bulkhead check` prints them without building"
            );
            std::process::exit(1);
        }
    }
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
