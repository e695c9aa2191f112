//! `bulkhead check`: the build's spec diagnostics, on demand.

use std::path::Path;
use std::process::ExitCode;

/// Loads and checks `root/specs`; prints a summary or every diagnostic.
pub fn run(root: &Path) -> anyhow::Result<ExitCode> {
    let config_ok = check_config(root);
    let specs = check_specs(root)?;
    Ok(if config_ok { specs } else { ExitCode::FAILURE })
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
