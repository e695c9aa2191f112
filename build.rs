//! Generates the servers from `specs/` (see `codegen/`). Spec errors stop the build, rendered like rustc.

fn main() {
    println!("cargo::rerun-if-changed=specs/servers");
    println!("cargo::rerun-if-changed=specs/connectors");
    println!("cargo::rerun-if-changed=specs/deployments");
    // Its identity rules and limits are part of generated/POLICY.md.
    println!("cargo::rerun-if-changed=config.yaml");
    // Its `owners:` become .github/CODEOWNERS.
    println!("cargo::rerun-if-changed=specs/policy-acks.yaml");
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    match bulkhead_codegen::Builder::new(root, out).run() {
        Ok(report) => {
            if let Some(warning) = report.mirror_warning {
                println!("cargo::warning={warning}");
            }
            for w in report.warnings {
                println!("cargo::warning={} ({})", w.message, w.location());
            }
        }
        Err(e) => {
            eprintln!("{e}");
            println!(
                "cargo::error=bulkhead: specs/ has errors: the diagnostics are below; `cargo run -p bulkhead-codegen --bin bulkhead-check` prints them without building"
            );
            std::process::exit(1);
        }
    }
}
