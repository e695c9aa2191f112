//! What a revision builds its servers with (`review::EngineInputs`): from git's object database
//! for the base, from the working tree for the change under review. The code of an engine crate
//! kept in the repository is identified by its folder's git tree id; the working tree's is the
//! id its folder will have once committed (a private index, never the repository's own).

use bulkhead_lang::review::{ENGINE_CRATES, EngineInputs, engine_paths, package_name};
use std::path::Path;

/// The files of `inputs` that are read whole, relative to the project's root.
const FILES: [&str; 4] = ["Cargo.lock", "Cargo.toml", ".cargo/config.toml", "build.rs"];

/// The project's folder inside its repository (`git rev-parse --show-prefix`, `""` at the top).
fn prefix(root: &Path) -> anyhow::Result<String> {
    Ok(
        String::from_utf8(super::git::git(root, &["rev-parse", "--show-prefix"])?)?
            .trim()
            .to_string(),
    )
}

fn fill(inputs: &mut EngineInputs, rel: &str, text: Option<String>) {
    match rel {
        "Cargo.lock" => inputs.lock = text,
        "Cargo.toml" => inputs.manifest = text,
        ".cargo/config.toml" => inputs.cargo_config = text,
        _ => inputs.build_script = text,
    }
}

/// The inputs of `commit`.
pub(super) fn at_commit(root: &Path, commit: &str) -> anyhow::Result<EngineInputs> {
    let prefix = prefix(root)?;
    let git = |args: &[&str]| super::git::git(root, args);
    let show = |rel: &str| -> Option<String> {
        git(&["show", &format!("{commit}:{prefix}{rel}")])
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let mut inputs = EngineInputs::default();
    for rel in FILES {
        let mut text = show(rel);
        if rel == ".cargo/config.toml" && text.is_none() {
            text = show(".cargo/config");
        }
        fill(&mut inputs, rel, text);
    }
    let listing = String::from_utf8(git(&[
        "ls-tree",
        "-r",
        "--name-only",
        "--full-tree",
        commit,
        "--",
        &format!("{prefix}."),
    ])?)?;
    for path in listing.lines().filter(|p| p.ends_with("/Cargo.toml")) {
        let Some(name) = git(&["show", &format!("{commit}:{path}")])
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| package_name(&t))
        else {
            continue;
        };
        if !ENGINE_CRATES.contains(&name.as_str()) {
            continue;
        }
        let folder = path.trim_end_matches("/Cargo.toml");
        let id = String::from_utf8(git(&["rev-parse", &format!("{commit}:{folder}")])?)?;
        let rel = folder.strip_prefix(&prefix).unwrap_or(folder).to_string();
        inputs.in_tree.insert(name, (rel, short(id.trim())));
    }
    Ok(inputs)
}

fn short(id: &str) -> String {
    id[..id.len().min(12)].to_string()
}

/// The inputs of the working tree at `root` (what would be committed: tracked and untracked
/// files that are not ignored).
pub(super) fn working_tree(root: &Path) -> anyhow::Result<EngineInputs> {
    let mut inputs = EngineInputs::default();
    for rel in FILES {
        let mut text = std::fs::read_to_string(root.join(rel)).ok();
        if rel == ".cargo/config.toml" && text.is_none() {
            text = std::fs::read_to_string(root.join(".cargo/config")).ok();
        }
        fill(&mut inputs, rel, text);
    }
    let git = |args: &[&str]| super::git::git(root, args);
    let listing = String::from_utf8(git(&[
        "ls-files",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
        ".",
    ])?)?;
    let prefix = prefix(root)?;
    // A private index: `git add` into a copy, so the repository's own index is left as it is.
    let index = tempfile::NamedTempFile::new()?;
    let own = String::from_utf8(git(&["rev-parse", "--git-path", "index"])?)?;
    let own = root.join(own.trim());
    if own.is_file() {
        std::fs::copy(&own, index.path())?;
    }
    for path in listing
        .lines()
        .filter(|p| *p == "Cargo.toml" || p.ends_with("/Cargo.toml"))
    {
        let Some(name) = std::fs::read_to_string(root.join(path))
            .ok()
            .and_then(|t| package_name(&t))
        else {
            continue;
        };
        if !ENGINE_CRATES.contains(&name.as_str()) || path == "Cargo.toml" {
            continue;
        }
        let folder = path.trim_end_matches("/Cargo.toml");
        let run = |args: &[&str]| -> anyhow::Result<Vec<u8>> {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(root)
                .env("GIT_INDEX_FILE", index.path())
                .args(args)
                .output()?;
            anyhow::ensure!(
                out.status.success(),
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            Ok(out.stdout)
        };
        run(&["add", "-A", "--", folder])?;
        let id = String::from_utf8(run(&[
            "write-tree",
            &format!("--prefix={prefix}{folder}/"),
        ])?)?;
        inputs
            .in_tree
            .insert(name, (folder.to_string(), short(id.trim())));
    }
    Ok(inputs)
}

/// Engine crates the manifest takes by a path outside the repository: their code is no part of
/// any revision, so the review cannot see it change (said, not judged).
pub(super) fn outside_paths(root: &Path, inputs: &EngineInputs) -> Vec<String> {
    let Some(manifest) = &inputs.manifest else {
        return Vec::new();
    };
    let top = super::git::git(root, &["rev-parse", "--show-toplevel"])
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .map(|s| std::path::PathBuf::from(s.trim()));
    engine_paths(manifest)
        .into_iter()
        .filter(
            |(_, path)| match (&top, std::fs::canonicalize(root.join(path))) {
                (Some(top), Ok(p)) => !p.starts_with(top),
                _ => true,
            },
        )
        .map(|(package, path)| format!("{package} = {{ path = \"{path}\" }}"))
        .collect()
}
