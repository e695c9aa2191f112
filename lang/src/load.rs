//! Finding, parsing and schema-checking spec files: `specs/{servers,connectors,deployments}/*.yaml`.

use crate::check::Loaded;
use crate::diag::Diagnostic;
use crate::schema::Schemas;
use crate::source::SourceFile;
use crate::spec::{ConnectorSpec, DeploymentSpec, ServerSpec, SpecKind};
use crate::yaml;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// Every spec file, parsed and schema-valid, grouped by kind.
#[derive(Default)]
pub struct SpecSet {
    /// `specs/connectors/*.yaml`
    pub connectors: Vec<Loaded<ConnectorSpec>>,
    /// `specs/servers/*.yaml`
    pub servers: Vec<Loaded<ServerSpec>>,
    /// `specs/deployments/*.yaml`
    pub deployments: Vec<Loaded<DeploymentSpec>>,
    /// Every file read (for rerun-if-changed and headers).
    pub files: Vec<PathBuf>,
    /// `name` of every file that parsed, valid or not, so that an error in one file does not
    /// cascade into "no such server" errors elsewhere.
    pub declared: std::collections::BTreeSet<(SpecKind, String)>,
}

/// Why loading could not even start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A spec folder or file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The `.yaml`/`.yml` files of `dir`, sorted; a missing folder is empty.
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LoadError::Io {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|source| LoadError::Io {
                path: dir.to_path_buf(),
                source,
            })?
            .path();
        if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Loads every spec under `specs_dir`; paths in diagnostics are shown relative to `root`.
pub fn load_dir(specs_dir: &Path, root: &Path) -> Result<(SpecSet, Vec<Diagnostic>), LoadError> {
    let mut sources = Vec::new();
    for kind in SpecKind::ALL {
        for path in yaml_files(&specs_dir.join(kind.folder()))? {
            let display = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            let file = SourceFile::read(&path, display).map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            sources.push((kind, file));
        }
    }
    Ok(load_sources(sources))
}

/// Loads in-memory sources (tests use this directly).
pub fn load_sources(sources: Vec<(SpecKind, SourceFile)>) -> (SpecSet, Vec<Diagnostic>) {
    let schemas = Schemas::new();
    let mut set = SpecSet::default();
    let mut errors = Vec::new();
    for (kind, file) in sources {
        set.files.push(file.path.clone());
        match kind {
            SpecKind::Server => push(
                &schemas,
                kind,
                file,
                &mut set.servers,
                &mut set.declared,
                &mut errors,
            ),
            SpecKind::Connector => push(
                &schemas,
                kind,
                file,
                &mut set.connectors,
                &mut set.declared,
                &mut errors,
            ),
            SpecKind::Deployment => push(
                &schemas,
                kind,
                file,
                &mut set.deployments,
                &mut set.declared,
                &mut errors,
            ),
        }
    }
    (set, errors)
}

fn push<T: DeserializeOwned>(
    schemas: &Schemas,
    kind: SpecKind,
    file: SourceFile,
    into: &mut Vec<Loaded<T>>,
    declared: &mut std::collections::BTreeSet<(SpecKind, String)>,
    errors: &mut Vec<Diagnostic>,
) {
    let root = match yaml::parse(&file) {
        Ok(root) => root,
        Err(mut e) => {
            errors.append(&mut e);
            // Its name is unknown; the file's stem stands in, so references to it elsewhere do
            // not add "does not exist" errors on top of the syntax error.
            if let Some(stem) = file.path.file_stem() {
                declared.insert((kind, stem.to_string_lossy().into_owned()));
            }
            return;
        }
    };
    let value = root.to_json();
    if let Some(name) = value.get("name").and_then(serde_json::Value::as_str) {
        declared.insert((kind, name.to_string()));
    }
    let found = schemas.validate(kind, &file, &root, &value);
    let (value, partial) = if found.is_empty() {
        (value, false)
    } else {
        errors.extend(found);
        // Check what is valid, so one run reports the semantic errors too.
        match schemas
            .prune(kind, &value)
            .filter(|v| serde_json::from_value::<T>(v.clone()).is_ok())
        {
            Some(v) => (v, true),
            None => return,
        }
    };
    match serde_json::from_value::<T>(value) {
        Ok(spec) => into.push(Loaded {
            file,
            root,
            spec,
            partial,
        }),
        Err(e) => errors.push(
            Diagnostic::error(
                &file,
                root.span,
                format!("cannot read this {} spec", kind.schema_name()),
            )
            .label(e.to_string()),
        ),
    }
}
