//! Command-line interface: parse arguments, run one command, map errors to exit codes.

mod check;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Bulkhead: MCP servers from YAML specs, with permission, context and sensitivity enforced.
#[derive(Debug, Parser)]
#[command(name = "bulkhead", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate specs/ and print every diagnostic, without building anything.
    Check {
        /// The project folder holding specs/.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
}

/// Runs the CLI.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { root } => check::run(&root),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
