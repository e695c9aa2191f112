//! `bulkhead init DIR`: a new project of the example's shape outside this checkout, with the
//! engine as a dependency and the generator as a build-dependency. Everything is written into a
//! folder beside DIR first and renamed into place, so a refusal or a failure writes nothing.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

/// Where the new project takes the engine from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineSource {
    /// A registry version (`bulkhead = "0.1.0"`).
    Version(String),
    /// The checkout holding `engine/` and `codegen/`, relative to the new project.
    Path(String),
    /// A git repository, at a revision when one is given.
    Git {
        /// Its URL.
        url: String,
        /// A commit, tag or branch.
        rev: Option<String>,
    },
}

impl EngineSource {
    /// The `[dependencies]` line of `package` (`bulkhead` or `bulkhead-codegen`), in `folder`
    /// of a checkout (`engine`, `codegen`).
    fn dependency(&self, package: &str, folder: &str) -> String {
        match self {
            EngineSource::Version(v) => format!("{package} = \"{v}\""),
            EngineSource::Path(p) => {
                let p = p.trim_end_matches('/');
                format!("{package} = {{ path = \"{p}/{folder}\" }}")
            }
            EngineSource::Git { url, rev } => match rev {
                Some(r) => format!("{package} = {{ git = \"{url}\", rev = \"{r}\" }}"),
                None => format!("{package} = {{ git = \"{url}\" }}"),
            },
        }
    }
}

/// The checkout this engine was built from, when it is still on disk (it holds `codegen/`).
fn this_checkout() -> Option<PathBuf> {
    let engine = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = engine.parent()?;
    root.join("codegen/Cargo.toml")
        .is_file()
        .then(|| root.to_path_buf())
}

/// `to` relative to `from` (both absolute, lexically normal).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (f, t): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The default source: this checkout, relative to the new project; else this engine's version.
fn default_source(dir: &Path) -> EngineSource {
    match this_checkout() {
        Some(root) => {
            let rel = relative(dir, &root);
            EngineSource::Path(rel.to_string_lossy().replace('\\', "/"))
        }
        None => EngineSource::Version(env!("CARGO_PKG_VERSION").to_string()),
    }
}

/// `acme-tools` → (`acme-tools`, `acme_tools`): the package name and the starter server's name
/// (also the crate's name).
fn names(dir: &Path) -> anyhow::Result<(String, String)> {
    let package = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{}` has no folder name to name the project by",
                dir.display()
            )
        })?
        .to_string();
    let ok = package.len() <= 64
        && package.starts_with(|c: char| c.is_ascii_lowercase())
        && package
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    anyhow::ensure!(
        ok,
        "the project is named after its folder, `{package}`: use 1–64 lowercase letters, digits, `-` and `_`, starting with a letter"
    );
    let server = package.replace('-', "_");
    anyhow::ensure!(
        server != "bulkhead" && server != "bulkhead_codegen",
        "a project named `{package}` would shadow the engine's own crate; choose another folder name"
    );
    Ok((package, server))
}

/// The files of a new project named `package` with starter server `server`, relative to its
/// folder (the starter server's spec and handler come from `bulkhead new server`).
fn files(package: &str, server: &str, source: &EngineSource) -> Vec<(&'static str, String)> {
    let fill = |t: &str| {
        t.replace("{package}", package)
            .replace("{server}", server)
            .replace("{crate_name}", server)
            .replace("{engine}", &source.dependency("bulkhead", "engine"))
            .replace(
                "{codegen}",
                &source.dependency("bulkhead-codegen", "codegen"),
            )
    };
    vec![
        ("Cargo.toml", fill(include_str!("Cargo.toml.in"))),
        ("build.rs", fill(include_str!("build.rs.in"))),
        ("src/lib.rs", fill(include_str!("lib.rs.in"))),
        ("src/main.rs", fill(include_str!("main.rs.in"))),
        ("src/handlers/mod.rs", fill(include_str!("handlers.rs.in"))),
        ("specs/connectors/workspace.yaml", fill(include_str!("workspace.yaml.in"))),
        ("specs/deployments/local.yaml", fill(include_str!("deployment.yaml.in"))),
        ("specs/policy-acks.yaml", fill(include_str!("policy-acks.yaml.in"))),
        ("config.yaml", crate::config::EMBEDDED.replace(
            "# The engine's development defaults: embedded in a project's binary when the project has no\n# config.yaml, and what `bulkhead init` writes as a new project's config.yaml.",
            "# This project's runtime configuration (development defaults; docs: the engine's docs/).\n# Embedded in the binary by `cargo build` and used when no --config is given.",
        )),
        ("tests/starter.rs", fill(include_str!("starter_test.rs.in"))),
        (".github/workflows/ci.yml", fill(include_str!("ci.yml.in"))),
        (".gitignore", fill(include_str!("gitignore.in"))),
        ("README.md", fill(include_str!("README.md.in"))),
    ]
}

/// Writes a new project into `dir` (which must not exist or be empty), taking the engine from
/// `source` (default: this checkout by a relative path, else this engine's version).
pub fn run(dir: &Path, source: Option<EngineSource>) -> anyhow::Result<ExitCode> {
    if let Some(EngineSource::Path(p)) = &source {
        anyhow::ensure!(
            Path::new(p).is_relative(),
            "--engine-path `{p}`: give the engine's checkout relative to the new project, so the project builds on any machine"
        );
    }
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        anyhow::ensure!(
            entries.next().is_none(),
            "{} is not empty: `bulkhead init` writes a new project only into an empty or new folder (nothing was written)",
            dir.display()
        );
    }
    let abs = std::path::absolute(dir)?;
    let abs = normal(&abs);
    let (package, server) = names(&abs)?;
    let parent = abs
        .parent()
        .ok_or_else(|| anyhow::anyhow!("`{}` has no parent folder", abs.display()))?;
    std::fs::create_dir_all(parent)?;
    let source = source.unwrap_or_else(|| default_source(&abs));
    // Staged beside the destination (same file system), renamed into place at the end.
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{package}.init-"))
        .tempdir_in(parent)?;
    let stage = staging.path();
    for (rel, text) in files(&package, &server, &source) {
        let path = stage.join(rel);
        std::fs::create_dir_all(path.parent().expect("a file has a folder"))?;
        std::fs::write(&path, text)?;
    }
    super::new::new_server(stage, &server)?;
    // The starter's second tool opens what a truncated result saved in the workspace.
    let spec = stage.join(format!("specs/servers/{server}.yaml"));
    let mut text = std::fs::read_to_string(&spec)?;
    text.push_str(include_str!("read_file.yaml.in"));
    std::fs::write(&spec, text)?;
    if dir.exists() {
        std::fs::remove_dir(&abs)?;
    }
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &abs) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(anyhow::anyhow!(
            "moving the new project into {}: {e}",
            abs.display()
        ));
    }
    println!(
        "created {} (package `{package}`, server `{server}`)",
        dir.display()
    );
    match &source {
        EngineSource::Path(p) => println!("engine: the checkout at {p} (relative to the project)"),
        EngineSource::Git { url, .. } => println!("engine: {url}"),
        EngineSource::Version(v) => println!("engine: bulkhead {v} from the registry"),
    }
    println!(
        "next: cd {} && cargo build && cargo test && cargo run -- serve {server}",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `path` without `.` and with `..` applied (lexically; the folder may not exist yet).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_path_climbs_to_the_common_folder() {
        assert_eq!(
            relative(Path::new("/w/acme-tools"), Path::new("/w/main")),
            Path::new("../main")
        );
        assert_eq!(
            relative(Path::new("/w/a/b"), Path::new("/w/main")),
            Path::new("../../main")
        );
        assert_eq!(
            relative(Path::new("/w/main/x"), Path::new("/w/main")),
            Path::new("..")
        );
    }

    #[test]
    fn a_folder_name_that_is_not_a_package_name_is_refused() {
        assert!(names(Path::new("/w/Acme Tools")).is_err());
        assert!(names(Path::new("/w/bulkhead")).is_err());
        assert_eq!(
            names(Path::new("/w/acme-tools")).unwrap(),
            ("acme-tools".to_string(), "acme_tools".to_string())
        );
    }

    #[test]
    fn a_non_empty_folder_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("acme");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("notes.txt"), "mine").unwrap();
        let e = run(&target, None).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["acme"], "no staging folder is left behind");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 1);
    }

    #[test]
    fn an_absolute_engine_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(
            &dir.path().join("acme"),
            Some(EngineSource::Path("/work/main".into())),
        )
        .unwrap_err();
        assert!(e.to_string().contains("relative"), "{e}");
        assert!(!dir.path().join("acme").exists());
    }

    #[test]
    fn a_new_project_names_the_engine_by_a_relative_path_and_has_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("acme-tools");
        run(&target, Some(EngineSource::Path("../bulkhead".into()))).unwrap();
        let manifest = std::fs::read_to_string(target.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("bulkhead = { path = \"../bulkhead/engine\" }"),
            "{manifest}"
        );
        assert!(manifest.contains("bulkhead-codegen = { path = \"../bulkhead/codegen\" }"));
        for f in [
            "build.rs",
            "src/main.rs",
            "src/lib.rs",
            "src/handlers/mod.rs",
            "src/handlers/acme_tools.rs",
            "specs/servers/acme_tools.yaml",
            "specs/deployments/local.yaml",
            "specs/connectors/workspace.yaml",
            "config.yaml",
            "tests/starter.rs",
            ".github/workflows/ci.yml",
            ".gitignore",
        ] {
            assert!(target.join(f).is_file(), "{f} is missing");
        }
        let mods = std::fs::read_to_string(target.join("src/handlers/mod.rs")).unwrap();
        assert!(mods.contains("pub mod acme_tools;"), "{mods}");
        let all = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(all, 1, "no staging folder is left behind");
        // Nothing of the example.
        let spec = std::fs::read_to_string(target.join("specs/servers/acme_tools.yaml")).unwrap();
        assert!(
            !spec.contains("template") && !spec.contains("webhook"),
            "{spec}"
        );
        let config = std::fs::read_to_string(target.join("config.yaml")).unwrap();
        assert!(!config.contains("template"), "{config}");
    }

    #[test]
    fn a_git_source_pins_its_revision() {
        let s = EngineSource::Git {
            url: "https://example.org/bulkhead.git".into(),
            rev: Some("v0.1.0".into()),
        };
        assert_eq!(
            s.dependency("bulkhead", "engine"),
            "bulkhead = { git = \"https://example.org/bulkhead.git\", rev = \"v0.1.0\" }"
        );
    }
}
