//! `bulkhead audit verify`'s throughput: writes `MB` megabytes (default 1024) of chained audit
//! records by four writers into rotated files of 64 MiB (as `audit.rotate_bytes` makes them),
//! commits their heads into a signed checkpoint, then times reading and judging every file (the
//! work `verify` does: one streaming pass, the chain fields read from each line's end, one
//! SHA-256 per line) with the page cache warm, and once more after dropping it when run as root.
//!
//! Usage: `audit_verify [MB] [dir]` (release build). Prints `what bytes secs MB/s` lines.

use bulkhead::audit::chain::Chain;
use bulkhead::audit::checkpoint::{Stored, Update, WriterHead, next};
use bulkhead::audit::verify::{Evidence, Reader, judge, read_files, wanted};
use std::io::Write;
use std::time::Instant;

const ROTATE: u64 = 64 << 20;

fn main() -> anyhow::Result<()> {
    let mb: u64 = std::env::args().nth(1).map_or(Ok(1024), |a| a.parse())?;
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(2)
        .map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    let log = dir.join("audit-template.jsonl");
    let mut chains: Vec<Chain> = (0..4).map(|_| Chain::new("template")).collect();
    let started = Instant::now();
    let (mut files, mut written, mut in_file) = (Vec::new(), 0u64, 0u64);
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("part-0"))?);
    let mut line = Vec::with_capacity(1024);
    let mut i = 0u64;
    while written < mb << 20 {
        let record = format!(
            "{{\"ts\":\"2026-12-02T04:00:{:02}.{:03}Z\",\"call\":\"5f0c9e1a-{i:x}\",\"phase\":\"outcome\",\"user\":\"user{}\",\"session\":\"s{}\",\"tool\":\"read_file\",\"permission\":\"read\",\"level_before\":\"internal\",\"level_after\":\"internal\",\"outcome\":\"ok\",\"args\":{{\"bytes\":{},\"keys\":[\"path\"]}},\"detail\":\"read 1843 bytes from /workspace/notes/{}.md\"}}\n",
            i % 60,
            i % 1000,
            i % 97,
            i % 13,
            20 + i % 200,
            i % 5000
        );
        line.clear();
        chains[(i % 4) as usize].link_into(&mut line, record.as_bytes());
        out.write_all(&line)?;
        written += line.len() as u64;
        in_file += line.len() as u64;
        i += 1;
        if in_file >= ROTATE {
            out.flush()?;
            files.push(files.len());
            out = std::io::BufWriter::new(std::fs::File::create(
                dir.join(format!("part-{}", files.len())),
            )?);
            in_file = 0;
        }
    }
    out.flush()?;
    drop(out);
    // part-0 is the oldest: the highest rotation number.
    let parts = files.len() + 1;
    for p in 0..parts {
        let to = if p + 1 == parts {
            log.clone()
        } else {
            let mut n = log.as_os_str().to_owned();
            n.push(format!(".{}", parts - 1 - p));
            n.into()
        };
        std::fs::rename(dir.join(format!("part-{p}")), to)?;
    }
    eprintln!(
        "wrote {i} records, {written} bytes in {parts} files in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let key = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]);
    let mut newest: Option<Stored> = None;
    for c in &chains {
        let u = Update {
            writer: c.writer().to_owned(),
            head: Some(WriterHead {
                server: "template".into(),
                seq: c.last_seq(),
                hash: c.last_hash(),
                closed: true,
                floor: None,
                sealed: None,
                at: 0,
            }),
            ..Default::default()
        };
        let n = next(newest.as_ref().map(|s| (&s.checkpoint, s.hash())), &u);
        newest = Some(Stored::seal(n, Some(&key)));
    }
    let kept = vec![newest.expect("four writers")];
    let verifying = key.verifying_key();
    let run = |what: &str| -> anyhow::Result<()> {
        let t = Instant::now();
        let mut reader = Reader::new(Some(&kept[0].checkpoint), wanted(kept.first(), None));
        read_files(&log, parts, &mut reader)?;
        let report = judge(
            &reader,
            &Evidence {
                checkpoints: &kept,
                before: kept.first(),
                key: Some(&verifying),
                anchor: None,
                servers: None,
                now: 0,
                lease: 60,
            },
        );
        let secs = t.elapsed().as_secs_f64();
        anyhow::ensure!(report.ok(), "{:?}", report.problems);
        println!(
            "{what}\t{}\t{secs:.2}\t{:.0}",
            report.bytes,
            report.bytes as f64 / 1e6 / secs
        );
        Ok(())
    };
    run("verify (page cache warm)")?;
    if rustix::process::geteuid().is_root()
        && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
    {
        run("verify (page cache dropped)")?;
    }
    Ok(())
}
