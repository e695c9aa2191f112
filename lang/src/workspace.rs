//! The Cargo workspace the server image is built from, read with `cargo_metadata`: the package's
//! name and version (the default image tag) and every member's manifest and targets (the stubs
//! of the Dockerfile's dependency layer, and the files its build context admits).

use std::path::Path;

/// What the image build needs to know of the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    /// The root package's name.
    pub package: String,
    /// The root package's version.
    pub version: String,
    /// Every member, sorted by folder (`""` is the root).
    pub members: Vec<Member>,
}

/// One member package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its folder relative to the workspace root (`""` for the root package).
    pub dir: String,
    /// Its targets, sorted by path.
    pub targets: Vec<Target>,
}

/// One target of a member: its source file and kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    /// Source file relative to the workspace root.
    pub path: String,
    /// What it is.
    pub kind: Kind,
}

/// What a target is, as far as the image build cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A library (its stub is an empty file).
    Lib,
    /// A binary (the image's program is one).
    Bin,
    /// A build script.
    BuildScript,
    /// An example, test or bench: never built into the image, a stub keeps the manifest valid.
    Other,
}

impl Target {
    /// Whether the image's build compiles it (its sources belong in the build context).
    pub fn built(&self) -> bool {
        self.kind != Kind::Other
    }
}

impl Workspace {
    /// Reads the workspace at `root` (`cargo metadata --no-deps --offline`; `CARGO` names the
    /// cargo to run, as in a build script).
    pub fn read(root: &Path) -> Result<Workspace, String> {
        let meta = cargo_metadata::MetadataCommand::new()
            .manifest_path(root.join("Cargo.toml"))
            .no_deps()
            .other_options(vec!["--offline".to_string()])
            .exec()
            .map_err(|e| format!("cargo metadata: {e}"))?;
        let base = meta.workspace_root.as_std_path().to_path_buf();
        let rel = |p: &Path| -> Result<String, String> {
            p.strip_prefix(&base)
                .map(|r| r.to_string_lossy().replace('\\', "/"))
                .map_err(|_| format!("`{}` is outside the workspace", p.display()))
        };
        let root_package = meta
            .root_package()
            .ok_or("the workspace has no root package")?;
        let mut members = Vec::new();
        for p in meta.workspace_packages() {
            let dir = rel(p
                .manifest_path
                .parent()
                .map(|d| d.as_std_path())
                .unwrap_or(&base))?;
            let mut targets = p
                .targets
                .iter()
                .map(|t| {
                    use cargo_metadata::TargetKind as K;
                    let kind = if t
                        .kind
                        .iter()
                        .any(|k| matches!(k, K::Lib | K::RLib | K::ProcMacro))
                    {
                        Kind::Lib
                    } else if t.kind.contains(&K::Bin) {
                        Kind::Bin
                    } else if t.kind.contains(&K::CustomBuild) {
                        Kind::BuildScript
                    } else {
                        Kind::Other
                    };
                    Ok(Target {
                        path: rel(t.src_path.as_std_path())?,
                        kind,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            targets.sort();
            targets.dedup();
            members.push(Member { dir, targets });
        }
        members.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(Workspace {
            package: root_package.name.to_string(),
            version: root_package.version.to_string(),
            members,
        })
    }

    /// The files and folders the image's build reads, relative to the root, sorted: each
    /// member's manifest, the folder of each library and binary, each build script.
    pub fn sources(&self) -> Vec<String> {
        let mut out = self.manifests();
        for m in &self.members {
            for t in m.targets.iter().filter(|t| t.built()) {
                let item = match t.kind {
                    Kind::BuildScript => t.path.clone(),
                    _ => std::path::Path::new(&t.path)
                        .parent()
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                };
                if !item.is_empty() {
                    out.push(item);
                }
            }
        }
        out.sort();
        out.dedup();
        // A folder inside another listed one adds nothing.
        let all = out.clone();
        out.retain(|p| {
            !all.iter()
                .any(|q| q != p && p.starts_with(&format!("{q}/")))
        });
        out
    }

    /// The manifests of every member, relative to the root, sorted.
    pub fn manifests(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| {
                if m.dir.is_empty() {
                    "Cargo.toml".to_string()
                } else {
                    format!("{}/Cargo.toml", m.dir)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Workspace;

    #[test]
    fn this_workspace_reads_with_every_member_and_target() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let w = Workspace::read(&root).unwrap();
        assert_eq!(w.package, "bulkhead-example");
        assert_eq!(
            w.manifests(),
            [
                "Cargo.toml",
                "codegen/Cargo.toml",
                "engine/Cargo.toml",
                "lang/Cargo.toml",
                "vocab/Cargo.toml"
            ]
        );
        let root_targets: Vec<&str> = w.members[0]
            .targets
            .iter()
            .map(|t| t.path.as_str())
            .collect();
        for t in [
            "src/main.rs",
            "src/lib.rs",
            "build.rs",
            "tests/unit/main.rs",
            "bench/loadgen.rs",
        ] {
            assert!(root_targets.contains(&t), "{t}: {root_targets:?}");
        }
    }
}
