//! Benchmark: stream N bytes of generated log lines through `StreamPreview` into a file under a
//! temp dir; print elapsed time, throughput and peak RSS (`VmHWM`).
//!
//! `cargo run --release --example context_stream -- 1073741824`

use std::fmt::Write as _;
use std::io::BufWriter;
use std::time::Instant;

use bulkhead::context::{Presets, StreamPreview, render_saved};

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> anyhow::Result<()> {
    let target: u64 = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => 64 << 20,
    };
    let presets = Presets::builtin();
    let preset = presets
        .get("log_search")
        .ok_or_else(|| anyhow::anyhow!("no log_search preset"))?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("full.log");
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
    let rss_before = vm_hwm_kib();

    let levels = ["INFO", "WARN", "ERROR", "DEBUG"];
    let mut chunk = String::with_capacity(70_000);
    let mut written = 0u64;
    let mut i = 0u64;
    let start = Instant::now();
    let mut stream = StreamPreview::new(preset, None, file);
    while written < target {
        chunk.clear();
        // ~64 KiB chunks whose boundaries fall mid-line.
        while chunk.len() < 65_000 {
            let _ = writeln!(
                chunk,
                "2024-05-01T12:{:02}:{:02}.{:03}Z {} worker-{} request {i} handled in {}ms path=/api/v1/items/{}",
                (i / 60_000) % 60,
                (i / 1000) % 60,
                i % 1000,
                levels[(i % 4) as usize],
                i % 16,
                (i * 7) % 250,
                i * 31 % 100_003
            );
            i += 1;
        }
        let take = (target - written).min(chunk.len() as u64) as usize;
        let cut = chunk.len() / 2 + (i % 97) as usize;
        let cut = cut.min(take);
        stream.push_chunk(&chunk.as_bytes()[..cut])?;
        stream.push_chunk(&chunk.as_bytes()[cut..take])?;
        written += take as u64;
    }
    let outcome = stream.finish()?;
    let elapsed = start.elapsed();

    let file_len = std::fs::metadata(&path)?.len();
    let preview = outcome
        .preview
        .ok_or_else(|| anyhow::anyhow!("expected a preview for a large stream"))?;
    let rendered = render_saved(&preview, "/workspace/results/bench.log");
    println!("bytes streamed:   {written} (file {file_len})");
    println!("lines:            {}", preview.totals.lines);
    println!("elapsed:          {:.3} s", elapsed.as_secs_f64());
    println!(
        "throughput:       {:.1} MiB/s",
        written as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()
    );
    println!("VmHWM before:     {} KiB", rss_before.unwrap_or(0));
    println!("VmHWM peak:       {} KiB", vm_hwm_kib().unwrap_or(0));
    println!("preview chars:    {}", preview.text.chars().count());
    println!(
        "summary:          {}",
        rendered.lines().nth(1).unwrap_or("")
    );
    Ok(())
}
