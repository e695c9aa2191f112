//! `bulkhead-check [ROOT]`: the specs' diagnostics without building the server, so it runs while
//! a spec is broken (the server's build script stops the build then). `cargo run -p
//! bulkhead-codegen --bin bulkhead-check`; `bulkhead check` does the same and more (config.yaml,
//! connector data, `--against`).
//!
//! `bulkhead-check --generate-into DIR [ROOT]` also writes what this generator makes of ROOT's
//! specs into DIR: the review by the base's rules (`scripts/review`) runs the base revision's
//! build of it on the change's specs.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut into = None;
    if args.first().is_some_and(|a| a == "--generate-into") {
        if args.len() < 2 {
            eprintln!("bulkhead-check: --generate-into needs a folder");
            return ExitCode::FAILURE;
        }
        into = Some(PathBuf::from(args.remove(1)));
        args.remove(0);
    }
    let root = args
        .first()
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    match bulkhead_codegen::load(&root.join("specs"), &root) {
        Ok(model) => {
            for w in &model.warnings {
                eprintln!("{}\n", w.render());
            }
            if let Some(dir) = into
                && let Err(e) = bulkhead_codegen::generate(&model).write_into_whole(&dir)
            {
                eprintln!("bulkhead-check: {}: {e}", dir.display());
                return ExitCode::FAILURE;
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
