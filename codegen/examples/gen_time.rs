//! Times the pipeline as `build.rs` runs it: the example specs, and a generated N-tool spec.
//! `cargo run -p bulkhead-codegen --example gen_time -- [N]` (default 1000). Prints milliseconds.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

fn time(label: &str, root: &Path) {
    let out = tempfile_dir("bulkhead-gen-out");
    let runs = 5;
    let mut best = f64::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let model = bulkhead_codegen::load(&root.join("specs"), root).expect("specs build");
        let output = bulkhead_codegen::generate(&model);
        output.write_into(&out, &["rs"]).expect("write");
        best = best.min(start.elapsed().as_secs_f64() * 1e3);
    }
    println!("{label}: best of {runs} = {best:.1} ms (load + check + emit + write-if-changed)");
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    time("example specs", &repo);

    let root = tempfile_dir("bulkhead-gen-big");
    std::fs::create_dir_all(root.join("specs/servers")).expect("dirs");
    let mut spec = String::from("name: big\ninstructions: a server with many tools\ntools:\n");
    for i in 0..n {
        let _ = write!(
            spec,
            "  tool_{i}:\n    description: Tool number {i}.\n    permission: read\n    context: default\n    sensitivity: internal\n    handler: rust\n    params:\n      query: {{ type: string, description: what to find, min_length: 1, max_length: 200 }}\n      limit: {{ type: integer, description: how many, minimum: 1, maximum: 100, default: 10 }}\n"
        );
    }
    std::fs::write(root.join("specs/servers/big.yaml"), spec).expect("write spec");
    time(&format!("{n}-tool spec"), &root);
    let _ = std::fs::remove_dir_all(&root);
}
