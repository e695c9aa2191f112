//! `bulkhead check`: the build's spec diagnostics, on demand.

use std::path::Path;
use std::process::ExitCode;

/// Loads and checks `root/specs`; prints a summary or every diagnostic. With `against`, also
/// prints a warning block listing how the specs weaken policy compared with that git revision.
pub fn run(root: &Path, against: Option<&str>) -> anyhow::Result<ExitCode> {
    let config_ok = check_config(root);
    let specs = check_specs(root)?;
    let data_ok = specs != ExitCode::SUCCESS || check_data(root);
    if let Some(rev) = against
        && specs == ExitCode::SUCCESS
    {
        compare(root, rev)?;
    }
    Ok(if config_ok && data_ok {
        specs
    } else {
        ExitCode::FAILURE
    })
}

/// Connector data (a sqlite file, a log folder) must not overlap the workspaces or the state
/// directory of `config.yaml` (or the embedded defaults): the same rule `serve` enforces at
/// start ([`bulkhead::config::StateConfig::refuse_data_overlap`]), with each path as this
/// environment sets it or, unset, its spec default.
fn check_data(root: &Path) -> bool {
    let path = root.join("config.yaml");
    let config = bulkhead::config::Config::load(path.exists().then_some(path.as_path()));
    let (Ok(config), Ok(model)) = (config, bulkhead_codegen::load(&root.join("specs"), root))
    else {
        return true; // reported by the other checks
    };
    let mut ok = true;
    for c in &model.connectors {
        for setting in ["path", "dir"] {
            let Some(written) = c.settings.get(setting).and_then(|v| v.as_str()) else {
                continue;
            };
            let refs = bulkhead_codegen::vars::references(&serde_json::json!(written));
            let value = match refs.first() {
                None => written.to_string(),
                Some(r) if r.whole => bulkhead::config::env_lookup(&r.name)
                    .unwrap_or_else(|| r.default().unwrap_or_default().to_string()),
                Some(_) => continue,
            };
            if value.is_empty() {
                continue;
            }
            if let Err(e) =
                config
                    .state
                    .refuse_data_overlap(&c.name, setting, Path::new(&value), root)
            {
                eprintln!(
                    "error: {e}
"
                );
                ok = false;
            }
        }
    }
    ok
}

/// Loads the specs of `rev` (from `git archive`) and prints what `root`'s specs weaken.
fn compare(root: &Path, rev: &str) -> anyhow::Result<()> {
    let base_dir = tempfile::tempdir()?;
    let tar = base_dir.path().join("specs.tar");
    let archived = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["archive", "--format=tar", "-o"])
        .arg(&tar)
        .arg(rev)
        .arg("specs")
        .output()?;
    if !archived.status.success() {
        anyhow::bail!(
            "cannot read specs/ at `{rev}`: {}",
            String::from_utf8_lossy(&archived.stderr).trim()
        );
    }
    let unpacked = std::process::Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(base_dir.path())
        .status()?;
    anyhow::ensure!(unpacked.success(), "cannot unpack specs/ of `{rev}`");
    let head = bulkhead_codegen::load(&root.join("specs"), root)?;
    let base = match bulkhead_codegen::load(&base_dir.path().join("specs"), base_dir.path()) {
        Ok(m) => m,
        Err(e) => {
            println!("note: specs/ at `{rev}` do not load ({e}); nothing to compare");
            return Ok(());
        }
    };
    let weaker = bulkhead_codegen::policy_diff::weakenings(&base, &head);
    if weaker.is_empty() {
        println!("policy: nothing weakened against `{rev}`");
        return Ok(());
    }
    println!("warning: this change weakens policy against `{rev}`:");
    for w in &weaker {
        println!("  - {} ({})", w.what, w.file);
    }
    println!("  Reviewers: check each line above before approving.");
    Ok(())
}

/// `config.yaml` at the root, when there is one: shape, keys, `${VAR}` expansion (with this
/// process's environment), key material. Prints the diagnostic; `true` when it is fine.
fn check_config(root: &Path) -> bool {
    let path = root.join("config.yaml");
    if !path.exists() {
        return true;
    }
    let checked = bulkhead::config::Config::load(Some(&path))
        .map_err(|e| e.to_string())
        .and_then(|c| {
            bulkhead::auth::Verifier::new(&c.auth)
                .map(|_| ())
                .map_err(|e| format!("{}: {e}", path.display()))
        });
    match checked {
        Ok(()) => {
            println!("config ok: {}", path.display());
            true
        }
        Err(e) => {
            eprintln!(
                "{e}
"
            );
            false
        }
    }
}

fn check_specs(root: &Path) -> anyhow::Result<ExitCode> {
    match bulkhead_codegen::load(&root.join("specs"), root) {
        Ok(model) => {
            for w in &model.warnings {
                eprintln!("{}\n", w.render());
            }
            let tools: usize = model.servers.iter().map(|s| s.tools.len()).sum();
            println!(
                "specs ok: {} server(s), {} tool(s), {} connector(s), {} deployment(s)",
                model.servers.len(),
                tools,
                model.connectors.len(),
                model.deployments.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(bulkhead_codegen::BuildError::Specs(d)) => {
            eprint!("{d}");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.into()),
    }
}
