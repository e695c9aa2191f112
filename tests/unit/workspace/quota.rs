//! Disk limits: a session's bytes and files, the free-space floor, saved results (one file per
//! query, cut at their cap, the oldest removed beyond the budget, nothing left by a failed save).

use super::*;
use bulkhead::workspace::{DiskLimits, WorkspaceError, query_key};
use std::io::Write as _;

fn session(limits: DiskLimits) -> (tempfile::TempDir, SessionWorkspace) {
    let tmp = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::new(tmp.path().join("root"))
        .unwrap()
        .with_limits(limits);
    let ws = root.session(&id("alice", "s1")).unwrap();
    (tmp, ws)
}

fn quota_of(e: WorkspaceError) -> (&'static str, bool) {
    match e {
        WorkspaceError::Quota {
            limit, retryable, ..
        } => (limit, retryable),
        other => panic!("not a quota error: {other}"),
    }
}

#[test]
fn writes_past_the_session_byte_limit_are_refused_and_say_which_limit() {
    let (_t, ws) = session(DiskLimits {
        max_bytes: 10_000,
        ..DiskLimits::default()
    });
    ws.write("a.txt", vec![b'a'; 6_000]).unwrap();
    let e = ws.write("b.txt", vec![b'b'; 6_000]).unwrap_err();
    assert!(e.to_string().contains("workspace.max_bytes"), "{e}");
    assert_eq!(quota_of(e), ("workspace.max_bytes", true));
    // Replacing a file counts its old size out.
    ws.write("a.txt", vec![b'c'; 9_000]).unwrap();
    assert!(ws.append("a.txt", vec![b'd'; 2_000]).is_err());
    assert_eq!(ws.usage().unwrap().bytes, 9_000);
}

#[test]
fn writes_past_the_file_limit_are_refused() {
    let (_t, ws) = session(DiskLimits {
        max_files: 3,
        ..DiskLimits::default()
    });
    for i in 0..3 {
        ws.write(&format!("f{i}"), "x").unwrap();
    }
    assert_eq!(
        quota_of(ws.write("f3", "x").unwrap_err()),
        ("workspace.max_files", true)
    );
    ws.write("f0", "overwrite is fine").unwrap();
}

#[test]
fn the_free_space_floor_refuses_writes_before_the_disk_fills() {
    let free = {
        let (_t, ws) = session(DiskLimits::default());
        ws.free_bytes().expect("statvfs works here")
    };
    // A floor just above what is free: every write would dip below it.
    let (_t, ws) = session(DiskLimits {
        min_free_bytes: free + (1 << 30),
        ..DiskLimits::default()
    });
    let e = ws.write("x.txt", "hello").unwrap_err();
    assert_eq!(quota_of(e), ("workspace.min_free_bytes", false));
    assert!(ws.save_result("t", 1).is_err());
}

#[test]
fn the_same_query_overwrites_its_result_and_other_queries_add_theirs() {
    let (_t, ws) = session(DiskLimits::default());
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"pattern":"."}"#).unwrap();
    let key = query_key("search_logs", &args);
    let mut paths = Vec::new();
    for round in 0..5 {
        let mut f = ws.save_result("search_logs", key).unwrap();
        write!(f, "round {round}").unwrap();
        paths.push(f.commit(&ws, "log").unwrap().path);
    }
    assert!(paths.windows(2).all(|w| w[0] == w[1]), "{paths:?}");
    assert_eq!(ws.read_to_string(&paths[0]).unwrap(), "round 4");
    let mut other = ws.save_result("search_logs", key ^ 1).unwrap();
    other.write_all(b"other").unwrap();
    let p = other.commit(&ws, "log").unwrap().path;
    assert_ne!(p, paths[0]);
    assert_eq!(ws.list("results").unwrap().len(), 2);
}

#[test]
fn a_result_is_cut_at_its_cap_and_says_so() {
    let (_t, ws) = session(DiskLimits {
        max_result_bytes: 1_000,
        ..DiskLimits::default()
    });
    let mut f = ws.save_result("t", 7).unwrap();
    for _ in 0..100 {
        f.write_all(&[b'x'; 100]).unwrap();
    }
    let saved = f.commit(&ws, "txt").unwrap();
    assert!(saved.cut);
    assert_eq!(saved.bytes, 1_000);
    assert_eq!(ws.read(&saved.path).unwrap().len(), 1_000);
}

#[test]
fn an_unfinished_result_leaves_nothing_behind() {
    let (_t, ws) = session(DiskLimits::default());
    {
        let mut f = ws.save_result("t", 9).unwrap();
        f.write_all(b"half of it").unwrap();
        // Dropped: a cancelled call, a failed stream.
    }
    assert!(
        ws.list("results").unwrap().is_empty(),
        "{:?}",
        ws.list("results").unwrap()
    );
}

#[test]
fn the_oldest_results_make_room_and_concurrent_saves_stay_whole() {
    let (_t, ws) = session(DiskLimits {
        results_max_files: 10,
        ..DiskLimits::default()
    });
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let ws = &ws;
            s.spawn(move || {
                for i in 0..25u64 {
                    let mut f = ws.save_result("q", t * 1000 + i).unwrap();
                    f.write_all(format!("{t}-{i}").as_bytes()).unwrap();
                    f.commit(ws, "txt").unwrap();
                }
            });
        }
    });
    let files = ws.list("results").unwrap();
    assert!(
        files.len() <= 10 && !files.is_empty(),
        "{} results kept",
        files.len()
    );
    for f in files {
        let text = ws.read_to_string(&format!("results/{}", f.name)).unwrap();
        assert!(text.contains('-'), "{}: {text:?}", f.name);
    }
}
