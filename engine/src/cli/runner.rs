//! `bulkhead import mcp -- npx -y <package> …` and `-- uvx <package> …`, the forms upstream
//! READMEs give: import is an explicit, networked developer step, so the package is installed
//! here at one exact version into the project's cache (`.bulkhead/upstreams/<name>`, ignored by
//! git), listed from there, and recorded in the lock. A jail has no network to download into,
//! so a runner that fetches at start could never run on an instance.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// A package installed for an import: the command that starts it from the cache, and the
/// package at its exact version as the lock records it.
#[derive(Debug)]
pub struct Installed {
    /// The program (absolute, in the cache) and its arguments.
    pub command: Vec<String>,
    /// `npm:NAME@VERSION` or `pypi:NAME==VERSION`.
    pub package: String,
}

/// When `command` runs a package through `npx` or `uvx`, installs that package into the
/// project's cache and says how to start it; `None` for any other command.
pub fn install(root: &Path, name: &str, command: &[String]) -> anyhow::Result<Option<Installed>> {
    let Some(first) = command.first() else {
        return Ok(None);
    };
    let runner = Path::new(first)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    let root = match runner {
        "npx" | "uvx" => root.canonicalize()?,
        _ => return Ok(None),
    };
    let dir = root.join(".bulkhead/upstreams").join(name);
    match runner {
        "npx" => {
            let (spec, args) = package_and_args(&command[1..], &["-y", "--yes", "-q", "--quiet"])?;
            npm(&dir, spec, args).map(Some)
        }
        "uvx" => {
            let (spec, args) = package_and_args(&command[1..], &["-q", "--quiet"])?;
            pypi(&dir, spec, args).map(Some)
        }
        _ => Ok(None),
    }
}

/// The package a runner is given and the arguments after it; the runner's own flags (`skip`)
/// are dropped, and any other flag before the package is refused (it would change what runs).
fn package_and_args<'a>(
    rest: &'a [String],
    skip: &[&str],
) -> anyhow::Result<(&'a str, &'a [String])> {
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        if skip.contains(&a.as_str()) {
            i += 1;
            continue;
        }
        anyhow::ensure!(
            !a.starts_with('-'),
            "`{a}` before the package: give the package first after the runner (and its -y), e.g. `npx -y @modelcontextprotocol/server-everything`"
        );
        return Ok((a.as_str(), &rest[i + 1..]));
    }
    anyhow::bail!("no package after the runner")
}

/// Runs `cmd`, failing with its stderr.
fn run(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: cannot start {:?}", cmd.get_program()))?;
    anyhow::ensure!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `NAME` and the version part of an npm spec `NAME[@RANGE]` (`NAME` may be `@scope/name`).
fn npm_name(spec: &str) -> (&str, Option<&str>) {
    let at = spec.get(1..).and_then(|r| r.find('@')).map(|i| i + 1);
    match at {
        Some(i) => (&spec[..i], Some(&spec[i + 1..])),
        None => (spec, None),
    }
}

/// Installs an npm package (`npm view` resolves the exact version) under `dir`.
fn npm(dir: &Path, spec: &str, args: &[String]) -> anyhow::Result<Installed> {
    let (pkg, _) = npm_name(spec);
    let view = run(
        Command::new("npm").args(["view", spec, "version", "--json"]),
        &format!("resolving {spec} on the npm registry"),
    )?;
    let version = match serde_json::from_str::<serde_json::Value>(view.trim()) {
        Ok(serde_json::Value::String(v)) => v,
        Ok(serde_json::Value::Array(vs)) => vs
            .last()
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no version of {spec} on the npm registry"))?,
        _ => anyhow::bail!("`npm view {spec} version` answered {view:?}"),
    };
    std::fs::create_dir_all(dir)?;
    let exact = format!("{pkg}@{version}");
    eprintln!("installing {exact} into {}", dir.display());
    run(
        Command::new("npm")
            .args(["install", "--prefix"])
            .arg(dir)
            .args([
                "--omit=dev",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                &exact,
            ]),
        &format!("npm install {exact}"),
    )?;
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        dir.join("node_modules").join(pkg).join("package.json"),
    )?)?;
    let unscoped = pkg.rsplit('/').next().unwrap_or(pkg);
    let bin = match manifest.get("bin") {
        Some(serde_json::Value::String(_)) => unscoped.to_string(),
        Some(serde_json::Value::Object(bins)) if bins.len() == 1 => {
            bins.keys().next().cloned().unwrap_or_default()
        }
        Some(serde_json::Value::Object(bins)) if bins.contains_key(unscoped) => {
            unscoped.to_string()
        }
        Some(serde_json::Value::Object(bins)) => anyhow::bail!(
            "{exact} provides several programs ({}): import with the one to run, e.g. `-- {}/node_modules/.bin/<program>`",
            bins.keys().cloned().collect::<Vec<_>>().join(", "),
            dir.display()
        ),
        _ => anyhow::bail!("{exact} provides no program (`bin` in its package.json)"),
    };
    Ok(Installed {
        command: started(dir.join("node_modules/.bin").join(&bin), args),
        package: format!("npm:{exact}"),
    })
}

/// Installs a PyPI package into a virtualenv under `dir` (pip resolves the version).
fn pypi(dir: &Path, spec: &str, args: &[String]) -> anyhow::Result<Installed> {
    let pkg = spec
        .split(['=', '<', '>', '!', '~', '['])
        .next()
        .unwrap_or(spec)
        .trim();
    let venv = dir.join("venv");
    eprintln!("installing {spec} into {}", venv.display());
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    let pip = venv.join("bin/pip");
    run(
        Command::new(&pip).args([
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            spec,
        ]),
        &format!("pip install {spec}"),
    )?;
    let show = run(Command::new(&pip).args(["show", pkg]), "pip show")?;
    let version = show
        .lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| anyhow::anyhow!("pip show {pkg} names no version"))?;
    let program = venv.join("bin").join(pkg);
    anyhow::ensure!(
        program.is_file(),
        "{pkg}=={version} provides no program named `{pkg}`: import with the one to run, e.g. `-- {}/<program>`",
        venv.join("bin").display()
    );
    Ok(Installed {
        command: started(program, args),
        package: format!("pypi:{pkg}=={version}"),
    })
}

fn started(program: PathBuf, args: &[String]) -> Vec<String> {
    std::iter::once(program.to_string_lossy().into_owned())
        .chain(args.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_package_is_the_first_word_after_the_runners_own_flags() {
        let rest = v(&["-y", "@scope/server@1.2.3", "stdio", "--port", "1"]);
        let (spec, args) = package_and_args(&rest, &["-y"]).unwrap();
        assert_eq!(spec, "@scope/server@1.2.3");
        assert_eq!(args, v(&["stdio", "--port", "1"]));
        assert!(package_and_args(&v(&["--package", "x", "y"]), &["-y"]).is_err());
        assert!(package_and_args(&v(&["-y"]), &["-y"]).is_err());
        assert_eq!(
            npm_name("@scope/server@1.2.3"),
            ("@scope/server", Some("1.2.3"))
        );
        assert_eq!(npm_name("@scope/server"), ("@scope/server", None));
        assert_eq!(npm_name("server@^2"), ("server", Some("^2")));
    }

    #[test]
    fn other_commands_are_not_installed() {
        let dir = tempfile::tempdir().unwrap();
        let got = install(
            dir.path(),
            "x",
            &v(&["mcp-server-time", "--local-timezone", "UTC"]),
        );
        assert!(got.unwrap().is_none());
        assert!(!dir.path().join(".bulkhead").exists());
    }
}
