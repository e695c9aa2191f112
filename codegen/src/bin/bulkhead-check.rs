//! `bulkhead-check [ROOT]`: the specs' diagnostics without building the server, so it runs while
//! a spec is broken (the server's build script stops the build then). `cargo run -p
//! bulkhead-codegen --bin bulkhead-check`; `bulkhead check` does the same and more (config.yaml,
//! connector data, `--against`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    match bulkhead_codegen::load(&root.join("specs"), &root) {
        Ok(model) => {
            for w in &model.warnings {
                eprintln!("{}\n", w.render());
            }
            println!("{}", bulkhead_codegen::summary(&model));
            ExitCode::SUCCESS
        }
        Err(bulkhead_codegen::BuildError::Specs(d)) => {
            eprint!("{d}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bulkhead-check: {e}");
            ExitCode::FAILURE
        }
    }
}
