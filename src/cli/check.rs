//! `bulkhead check`: the build's spec diagnostics, on demand.

use std::path::Path;
use std::process::ExitCode;

/// Loads and checks `root/specs`; prints a summary or every diagnostic.
pub fn run(root: &Path) -> anyhow::Result<ExitCode> {
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
