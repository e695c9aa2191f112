//! The example deployment's command line: the engine's, serving this project's servers.

fn main() -> std::process::ExitCode {
    bulkhead::cli::main(&bulkhead_example::servers::PROJECT)
}
