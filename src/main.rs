//! The `bulkhead` command line.

mod cli;

fn main() -> std::process::ExitCode {
    #[cfg(feature = "failpoints")]
    bulkhead::failpoints::setup();
    cli::main()
}
