//! What the cancellation tests and `bench/cancel.rs` share: a large log of lines that never
//! match, and a process's bytes read so far (`rchar` in `/proc/<pid>/io`, which counts every
//! `read`, file or socket).

use std::io::Write as _;
use std::path::Path;

/// Writes about `bytes` of one repeated ordinary log line to `path` (1 MiB blocks).
pub fn write_big_log(path: &Path, bytes: u64) -> std::io::Result<()> {
    let line =
        b"2026-11-22T14:00:00Z INFO request served in 12 ms by worker 7 for tenant acme-prod\n";
    let block: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take((1 << 20) / line.len() * line.len())
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut written = 0u64;
    while written < bytes {
        f.write_all(&block)?;
        written += block.len() as u64;
    }
    f.flush()
}

/// Bytes process `pid` has read so far, if it is still running.
pub fn rchar(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))?
        .trim()
        .parse()
        .ok()
}
