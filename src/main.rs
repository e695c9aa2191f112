//! The `bulkhead` command line.

mod cli;

fn main() -> std::process::ExitCode {
    // A jail's forwarder starts before anything else of the command line: no configuration,
    // no runtime, no logging (it runs inside a jail; see `jail::forward`).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(bulkhead::jail::forward::ARG) {
        let code = bulkhead::jail::forward::main(&args[1..]);
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    #[cfg(feature = "failpoints")]
    bulkhead::failpoints::setup();
    cli::main()
}
