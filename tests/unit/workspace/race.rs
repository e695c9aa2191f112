//! A path inside the session flips between a real directory and a symlink to an outside directory
//! (atomic `RENAME_EXCHANGE`) while other threads read, list and write through it. Bounded: at
//! least 2,000 swaps and 2,000 reads, or 5 s, whichever comes first.

use std::fs;
use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bulkhead::workspace::WorkspaceError;
use rustix::fs::{RenameFlags, renameat_with};

use super::{CANARY, Fixture, read_noatime};

const MIN_SWAPS: usize = 2_000;
const MIN_READS: usize = 2_000;
const MAX_TIME: Duration = Duration::from_secs(5);
const INSIDE: &str = "inside-content";

#[derive(Default)]
struct Seen {
    inside_reads: AtomicUsize,
    refused_reads: AtomicUsize,
    writes_ok: AtomicUsize,
    writes_refused: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

fn run_race(absolute: bool) {
    let fx = Fixture::new();
    let link_target = if absolute {
        fx.base.join("outside")
    } else {
        PathBuf::from("../../../outside")
    };
    let s = &fx.session_host;
    fs::create_dir(s.join("swap")).unwrap();
    fs::write(s.join("swap/f.txt"), INSIDE).unwrap();
    std::os::unix::fs::symlink(&link_target, s.join("alt")).unwrap();
    fs::write(
        fx.base.join("outside/only-outside.txt"),
        format!("{CANARY} only"),
    )
    .unwrap();
    super::age(&fx.base.join("outside/only-outside.txt"));
    fx.canaries.iter().for_each(|c| super::age(c));
    let canary_f = read_noatime(&fx.base.join("outside/f.txt"));
    let before = fx.outside_snapshot();

    let session_fd = fs::File::open(s).unwrap();
    let done = AtomicBool::new(false);
    let seen = Seen::default();
    let swaps = std::thread::scope(|scope| {
        let ws = &fx.ws;
        let (done, seen) = (&done, &seen);
        let violation = |msg: String| seen.violations.lock().unwrap().push(msg);
        for worker in 0..3 {
            scope.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    match ws.read("swap/f.txt") {
                        Ok(b) if b == INSIDE.as_bytes() => {
                            seen.inside_reads.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(b) => {
                            violation(format!("read returned {:?}", String::from_utf8_lossy(&b)))
                        }
                        Err(_) => {
                            seen.refused_reads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if let Ok(mut f) = ws.open("/workspace/swap/f.txt") {
                        let mut buf = String::new();
                        let _ = f.read_to_string(&mut buf);
                        if buf.contains(CANARY) {
                            violation(format!("open returned {buf:?}"));
                        }
                    }
                    if let Ok(list) = ws.list("swap")
                        && list.iter().any(|e| e.name == "only-outside.txt")
                    {
                        violation("list showed the outside directory".into());
                    }
                    let w = ws.write(&format!("swap/w{worker}.txt"), "W");
                    let a = ws.append("swap/log.txt", "L");
                    let c = ws.create(&format!("swap/c{worker}.txt"));
                    let n = [w.is_ok(), a.is_ok(), c.is_ok()]
                        .iter()
                        .filter(|ok| **ok)
                        .count();
                    seen.writes_ok.fetch_add(n, Ordering::Relaxed);
                    seen.writes_refused.fetch_add(3 - n, Ordering::Relaxed);
                    let _ = ws.remove(&format!("swap/w{worker}.txt"));
                    if let Err(WorkspaceError::Io { source, .. }) = ws.exists("swap/f.txt") {
                        violation(format!("unexpected io error {source}"));
                    }
                }
            });
        }
        let swapper = scope.spawn(move || {
            let start = Instant::now();
            let mut swaps = 0;
            loop {
                renameat_with(
                    &session_fd,
                    "swap",
                    &session_fd,
                    "alt",
                    RenameFlags::EXCHANGE,
                )
                .expect("exchange");
                swaps += 1;
                let (ok, refused) = (
                    seen.inside_reads.load(Ordering::Relaxed),
                    seen.refused_reads.load(Ordering::Relaxed),
                );
                let enough = ok > 0 && refused > 0 && ok + refused >= MIN_READS;
                if (swaps >= MIN_SWAPS && enough) || start.elapsed() > MAX_TIME {
                    break;
                }
            }
            done.store(true, Ordering::Relaxed);
            swaps
        });
        swapper.join().unwrap()
    });

    let violations = seen.violations.lock().unwrap();
    assert!(
        violations.is_empty(),
        "confinement broken: {:?}",
        &violations[..violations.len().min(5)]
    );
    let after = fx.outside_snapshot();
    assert_eq!(before, after, "something outside the session changed");
    fx.assert_canaries_unread("race");
    let (inside, refused) = (
        seen.inside_reads.load(Ordering::Relaxed),
        seen.refused_reads.load(Ordering::Relaxed),
    );
    eprintln!(
        "race ({link_target:?}): {swaps} swaps, reads ok {inside} / refused {refused}, writes ok {} / refused {}",
        seen.writes_ok.load(Ordering::Relaxed),
        seen.writes_refused.load(Ordering::Relaxed)
    );
    // The race was really exercised: reads landed in both states.
    assert!(
        inside > 0 && refused > 0,
        "race not exercised: ok {inside}, refused {refused}"
    );
    assert!(swaps >= 2, "too few swaps: {swaps}");

    // Positive control: an ambient open through the symlinked state does reach the canary.
    if !fs::symlink_metadata(s.join("swap"))
        .unwrap()
        .file_type()
        .is_symlink()
    {
        let fd = fs::File::open(s).unwrap();
        renameat_with(&fd, "swap", &fd, "alt", RenameFlags::EXCHANGE).unwrap();
    }
    assert_eq!(fs::read(s.join("swap/f.txt")).unwrap(), canary_f);
}

#[test]
fn symlink_swap_race_relative_link() {
    run_race(false);
}

#[test]
fn symlink_swap_race_absolute_link() {
    run_race(true);
}
