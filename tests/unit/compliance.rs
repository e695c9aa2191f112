//! The ratchet store and audit log against real files and real processes: never lowers,
//! concurrent writers from several processes, a writer killed mid-write, damaged files.

use bulkhead::compliance::{
    AuditLog, AuditRecord, ComplianceError, ComplianceStore, DatasetRecord, Outcome,
};
use bulkhead::identity::Identity;
use bulkhead::policy::{Permission, Sensitivity};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "BULKHEAD_COMPLIANCE_CHILD";
const DB: &str = "BULKHEAD_COMPLIANCE_DB";
const SEED: &str = "BULKHEAD_COMPLIANCE_SEED";
const GO: &str = "BULKHEAD_COMPLIANCE_GO";

const PROCS: u64 = 4;
const THREADS: u64 = 2;
const PER_THREAD: usize = 1_000;
const USERS: [&str; 2] = ["alice", "bob"];
const SESSIONS: [&str; 3] = ["s1", "s2", "s3"];
const DATASETS: usize = 12;

fn id(u: &str, s: &str) -> Identity {
    Identity::new(u, s).unwrap()
}

/// The libtest name of a test in this module, for `--exact`.
fn test_name(f: &str) -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::{f}")
}

fn spawn_child(name: &str, envs: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        &test_name(name),
        "--nocapture",
        "--include-ignored",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits for `child` until `deadline`, killing it and failing when it overruns.
fn wait_bounded(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {} overran its time bound", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The deterministic sequence of (user, session, dataset, level) one writer thread performs.
fn plan(seed: u64) -> Vec<(usize, usize, String, Sensitivity)> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..PER_THREAD)
        .map(|_| {
            (
                rng.random_range(0..USERS.len()),
                rng.random_range(0..SESSIONS.len()),
                format!("ds{}", rng.random_range(0..DATASETS)),
                skewed_level(rng.random_range(0..100)),
            )
        })
        .collect()
}

/// Mostly low levels with rare high ones, so each maximum is written by few writes late in the
/// run: a lost update then shows in the final state instead of being masked by a later write.
fn skewed_level(roll: u32) -> Sensitivity {
    match roll {
        0..60 => Sensitivity::Public,
        60..90 => Sensitivity::Internal,
        90..99 => Sensitivity::Confidential,
        _ => Sensitivity::Secret,
    }
}

fn thread_seed(proc_seed: u64, thread: u64) -> u64 {
    proc_seed.wrapping_mul(1_000).wrapping_add(thread)
}

#[test]
fn ratchet_never_lowers() {
    let dir = tempfile::tempdir().unwrap();
    let store = ComplianceStore::open(&dir.path().join("c.db")).unwrap();
    let who = id("alice", "s1");
    assert_eq!(store.level(&who).unwrap(), Sensitivity::Public);
    let after = store
        .escalate(&who, "payroll", Sensitivity::Secret)
        .unwrap();
    assert_eq!(after, Sensitivity::Secret);
    let after = store
        .escalate(&who, "crm", Sensitivity::Confidential)
        .unwrap();
    assert_eq!(after, Sensitivity::Secret);
    assert_eq!(store.level(&who).unwrap(), Sensitivity::Secret);
    // Re-adding a dataset lower keeps it; higher raises it.
    store.escalate(&who, "crm", Sensitivity::Internal).unwrap();
    let rec = store.record(&who).unwrap();
    assert_eq!(rec.datasets[0], ds("crm", Sensitivity::Confidential));
    store.escalate(&who, "crm", Sensitivity::Secret).unwrap();
    let rec = store.record(&who).unwrap();
    assert_eq!(rec.level, Sensitivity::Secret);
    assert_eq!(
        rec.datasets,
        vec![
            ds("crm", Sensitivity::Secret),
            ds("payroll", Sensitivity::Secret)
        ]
    );
    // Other sessions are untouched, and a reopened store (a new process) sees the same.
    assert_eq!(
        store.level(&id("alice", "s2")).unwrap(),
        Sensitivity::Public
    );
    drop(store);
    let store = ComplianceStore::open(&dir.path().join("c.db")).unwrap();
    assert_eq!(store.level(&who).unwrap(), Sensitivity::Secret);
}

fn ds(name: &str, level: Sensitivity) -> DatasetRecord {
    DatasetRecord {
        name: name.into(),
        level,
    }
}

#[test]
fn concurrent_writers_from_four_processes_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/compliance.db");
    let go = dir.path().join("go");
    let base_seed: u64 = rand::rng().random();
    println!("concurrent ratchet base seed {base_seed}");
    let seeds: Vec<u64> = (0..PROCS).map(|p| base_seed.wrapping_add(p)).collect();
    let mut children: Vec<Child> = seeds
        .iter()
        .map(|seed| {
            spawn_child(
                "concurrent_writer_child",
                &[
                    (ROLE, "writer".into()),
                    (DB, db.display().to_string()),
                    (SEED, seed.to_string()),
                    (GO, go.display().to_string()),
                ],
            )
        })
        .collect();
    std::fs::write(&go, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    for child in &mut children {
        let status = wait_bounded(child, deadline);
        assert!(status.success(), "writer child failed: {status}");
    }
    let mut expected: BTreeMap<(usize, usize), SessionExpect> = BTreeMap::new();
    for &seed in &seeds {
        for t in 0..THREADS {
            for (u, s, name, level) in plan(thread_seed(seed, t)) {
                let e = expected.entry((u, s)).or_default();
                e.level = e.level.max(level);
                let d = e.datasets.entry(name).or_default();
                *d = (*d).max(level);
            }
        }
    }
    let store = ComplianceStore::open(&db).unwrap();
    for ((u, s), want) in &expected {
        let rec = store.record(&id(USERS[*u], SESSIONS[*s])).unwrap();
        assert_eq!(rec.level, want.level, "{}/{}", USERS[*u], SESSIONS[*s]);
        let got: BTreeMap<String, Sensitivity> = rec
            .datasets
            .into_iter()
            .map(|d| (d.name, d.level))
            .collect();
        assert_eq!(got, want.datasets, "{}/{}", USERS[*u], SESSIONS[*s]);
    }
}

#[derive(Default)]
struct SessionExpect {
    level: Sensitivity,
    datasets: BTreeMap<String, Sensitivity>,
}

/// Child of [`concurrent_writers_from_four_processes_lose_nothing`]: runs its plan on
/// [`THREADS`] threads and checks every returned level is monotonic and at least the request.
#[test]
#[ignore = "spawned by concurrent_writers_from_four_processes_lose_nothing"]
fn concurrent_writer_child() {
    if std::env::var(ROLE).as_deref() != Ok("writer") {
        return;
    }
    let db = PathBuf::from(std::env::var(DB).unwrap());
    let seed: u64 = std::env::var(SEED).unwrap().parse().unwrap();
    let go = PathBuf::from(std::env::var(GO).unwrap());
    let start = Instant::now();
    while !go.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never told to go"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let store = ComplianceStore::open(&db).unwrap();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let store = &store;
            scope.spawn(move || {
                let mut seen: BTreeMap<(usize, usize), Sensitivity> = BTreeMap::new();
                for (u, s, name, level) in plan(thread_seed(seed, t)) {
                    let after = store
                        .escalate(&id(USERS[u], SESSIONS[s]), &name, level)
                        .unwrap();
                    assert!(after >= level, "escalate to {level} returned {after}");
                    let prev = seen.entry((u, s)).or_default();
                    assert!(after >= *prev, "level went from {prev} down to {after}");
                    *prev = after;
                }
            });
        }
    });
}

#[test]
fn writer_killed_mid_write_leaves_readable_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("compliance.db");
    let mut rng = rand::rng();
    let mut committed: Vec<(String, String, Sensitivity)> = Vec::new();
    for round in 0..3 {
        let mut child = spawn_child(
            "killed_writer_child",
            &[
                (ROLE, "killed".into()),
                (DB, db.display().to_string()),
                (SEED, round.to_string()),
            ],
        );
        let kill_after = rng.random_range(50..400);
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut reported = 0;
        for line in stdout.lines() {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix("COMMITTED ") else {
                continue;
            };
            let mut parts = rest.split(' ');
            let (session, dataset, level) = (
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().to_owned(),
                Sensitivity::parse(parts.next().unwrap()).unwrap(),
            );
            committed.push((session, dataset, level));
            reported += 1;
            if reported >= kill_after || Instant::now() > deadline {
                break;
            }
        }
        assert!(
            reported >= kill_after,
            "child stopped after {reported} commits"
        );
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "child was not killed: {status}");
        let store = ComplianceStore::open(&db).expect("state after SIGKILL must open");
        for (session, dataset, level) in &committed {
            let rec = store.record(&id("killed", session)).unwrap();
            assert!(rec.level >= *level, "{session}: {} < {level}", rec.level);
            let d = rec.datasets.iter().find(|d| &d.name == dataset);
            assert!(
                d.is_some_and(|d| d.level >= *level),
                "{session}/{dataset} lost"
            );
        }
    }
}

/// Child of [`writer_killed_mid_write_leaves_readable_state`]: escalates in a tight loop,
/// printing each commit, until it is killed (bounded in case it never is).
#[test]
#[ignore = "spawned by writer_killed_mid_write_leaves_readable_state"]
fn killed_writer_child() {
    if std::env::var(ROLE).as_deref() != Ok("killed") {
        return;
    }
    let db = PathBuf::from(std::env::var(DB).unwrap());
    let round = std::env::var(SEED).unwrap();
    let store = ComplianceStore::open(&db).unwrap();
    let start = Instant::now();
    for i in 0u64..200_000 {
        if start.elapsed() > Duration::from_secs(120) {
            break;
        }
        let session = format!("r{round}-s{}", i / 4);
        let dataset = format!("d{}", i % 3);
        let level = Sensitivity::ALL[(i % 4) as usize];
        store
            .escalate(&id("killed", &session), &dataset, level)
            .unwrap();
        println!("COMMITTED {session} {dataset} {level}");
    }
}

/// A store with one secret session, closed, so its whole state is in the main file.
fn secret_store(dir: &Path) -> PathBuf {
    let path = dir.join("c.db");
    let store = ComplianceStore::open(&path).unwrap();
    for i in 0..200 {
        let who = id("alice", &format!("s{i}"));
        store
            .escalate(&who, "payroll", Sensitivity::Secret)
            .unwrap();
    }
    drop(store);
    assert!(!dir.join("c.db-wal").exists(), "closing must checkpoint");
    path
}

fn assert_fails_closed(path: &Path, what: &str) {
    let (store, open_err) = ComplianceStore::open_fail_closed(path);
    assert!(open_err.is_some(), "{what}: opened without error");
    let (level, err) = store.level_fail_closed(&id("alice", "s1"));
    assert_eq!(level, Sensitivity::Secret, "{what}");
    assert!(err.is_some(), "{what}: no error reported");
    assert!(store.level(&id("nobody", "s")).is_err(), "{what}");
    assert!(store.record(&id("alice", "s1")).is_err(), "{what}");
    assert!(
        ComplianceStore::open(path).is_err(),
        "{what}: strict open succeeded"
    );
}

#[test]
fn garbage_file_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let mut garbage = vec![0u8; 16 * 1024];
    rand::rng().fill(&mut garbage[..]);
    std::fs::write(&path, &garbage).unwrap();
    assert_fails_closed(&path, "garbage");
    let e = ComplianceStore::open(&path).unwrap_err();
    assert!(matches!(e, ComplianceError::Corrupt { .. }), "{e}");
    // The garbage was not overwritten with a fresh, public store.
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
fn truncated_file_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = secret_store(dir.path());
    let full = std::fs::read(&path).unwrap();
    assert!(
        full.len() > 3 * 4096,
        "store too small to truncate meaningfully"
    );
    for len in [
        0,
        50,
        100,
        4096,
        2 * 4096,
        full.len() / 2,
        full.len() - 4096,
    ] {
        std::fs::write(&path, &full[..len]).unwrap();
        assert_fails_closed(&path, &format!("truncated to {len}"));
    }
    std::fs::write(&path, &full).unwrap();
    let store = ComplianceStore::open(&path).unwrap();
    assert_eq!(
        store.level(&id("alice", "s1")).unwrap(),
        Sensitivity::Secret
    );
}

#[test]
fn wrong_schema_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE sessions (user TEXT, session TEXT, level INTEGER);")
        .unwrap();
    drop(conn);
    assert_fails_closed(&other, "foreign sqlite file");
    let e = ComplianceStore::open(&other).unwrap_err();
    assert!(matches!(e, ComplianceError::SchemaMismatch { .. }), "{e}");

    let path = secret_store(dir.path());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    assert_fails_closed(&path, "future schema version");
}

#[test]
fn out_of_range_level_is_corrupt_not_public() {
    let dir = tempfile::tempdir().unwrap();
    let path = secret_store(dir.path());
    let store = ComplianceStore::open(&path).unwrap();
    // Damage a row behind the open store's back (another process, a careless admin).
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER sessions_never_lower; PRAGMA ignore_check_constraints = ON;
         UPDATE sessions SET level = -1 WHERE session = 's1';",
    )
    .unwrap();
    drop(conn);
    let (level, err) = store.level_fail_closed(&id("alice", "s1"));
    assert_eq!(level, Sensitivity::Secret);
    assert!(
        matches!(err, Some(ComplianceError::Corrupt { .. })),
        "{err:?}"
    );
    assert!(store.record(&id("alice", "s1")).is_err());
    // A fresh open refuses the file outright.
    drop(store);
    assert_fails_closed(&path, "out-of-range level");
}

#[test]
fn unreachable_or_unreadable_file_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    // Parent is a regular file: fails even for root.
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    assert_fails_closed(&file.join("c.db"), "parent is a file");
    // The path is a directory.
    let as_dir = dir.path().join("is-a-dir.db");
    std::fs::create_dir(&as_dir).unwrap();
    assert_fails_closed(&as_dir, "path is a directory");
    // A symlink planted at the path is not followed.
    let real = secret_store(dir.path());
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert_fails_closed(&link, "path is a symlink");
    // Mode 000 stops everyone but root; root bypasses it, so only check it where it bites.
    if !rustix::process::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert_fails_closed(&real, "file mode 000");
    }
}

#[test]
fn audit_lines_from_threads_and_processes_all_parse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit/audit.jsonl");
    let children: Vec<Child> = (0..2)
        .map(|p| {
            spawn_child(
                "audit_writer_child",
                &[
                    (ROLE, "audit".into()),
                    (DB, path.display().to_string()),
                    (SEED, p.to_string()),
                ],
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    for mut child in children {
        let status = wait_bounded(&mut child, deadline);
        assert!(status.success(), "audit child failed: {status}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let rec: AuditRecord = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} does not parse ({e}): {line:?}", n + 1));
        assert!(seen.insert(rec.tool.clone()), "duplicate {}", rec.tool);
        assert_eq!(rec.detail.as_deref().map(str::len), Some(AUDIT_DETAIL));
    }
    assert_eq!(seen.len(), 2 * AUDIT_THREADS * AUDIT_LINES, "lines lost");
}

const AUDIT_THREADS: usize = 4;
const AUDIT_LINES: usize = 500;
/// Long enough that a torn write would be visible.
const AUDIT_DETAIL: usize = 3000;

/// Child of [`audit_lines_from_threads_and_processes_all_parse`].
#[test]
#[ignore = "spawned by audit_lines_from_threads_and_processes_all_parse"]
fn audit_writer_child() {
    if std::env::var(ROLE).as_deref() != Ok("audit") {
        return;
    }
    let path = PathBuf::from(std::env::var(DB).unwrap());
    let p = std::env::var(SEED).unwrap();
    let log = AuditLog::open(&path).unwrap();
    let who = id("alice", "s1");
    std::thread::scope(|scope| {
        for t in 0..AUDIT_THREADS {
            let (log, who, p) = (&log, &who, &p);
            scope.spawn(move || {
                for i in 0..AUDIT_LINES {
                    let rec = AuditRecord::now(
                        who,
                        &format!("p{p}-t{t}-{i}"),
                        Permission::Read,
                        Sensitivity::Public,
                        Sensitivity::Confidential,
                        Outcome::Escalated,
                        Some(t.to_string().repeat(AUDIT_DETAIL)),
                    );
                    log.append(&rec).unwrap();
                }
            });
        }
    });
}

/// The in-memory level cache: a reader that has cached a level sees an escalation made by another
/// store on the same file (another process) on its very next read, and never a lower level.
#[test]
fn cached_levels_follow_escalations_from_other_stores() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/c.db");
    let reader = ComplianceStore::open(&path).unwrap();
    let writer = ComplianceStore::open(&path).unwrap();
    let u = id("alice", "s1");
    for _ in 0..3 {
        assert_eq!(
            reader.level(&u).unwrap(),
            Sensitivity::Public,
            "cached read"
        );
    }
    for level in [
        Sensitivity::Internal,
        Sensitivity::Confidential,
        Sensitivity::Secret,
    ] {
        writer.escalate(&u, "d", level).unwrap();
        assert_eq!(
            reader.level(&u).unwrap(),
            level,
            "the reader's cache must not hide an escalation"
        );
        assert_eq!(reader.level(&u).unwrap(), level);
    }
    // A child process escalates a session the parent has cached.
    let v = id("bob", "s2");
    assert_eq!(reader.level(&v).unwrap(), Sensitivity::Public);
    let mut child = spawn_child(
        "cache_escalation_child",
        &[("BULKHEAD_CACHE_DB", path.display().to_string())],
    );
    assert!(wait_bounded(&mut child, Instant::now() + Duration::from_secs(60)).success());
    assert_eq!(
        reader.level(&v).unwrap(),
        Sensitivity::Confidential,
        "an escalation by another process is seen at once"
    );
}

#[test]
#[ignore = "spawned by cached_levels_follow_escalations_from_other_stores"]
fn cache_escalation_child() {
    let Ok(path) = std::env::var("BULKHEAD_CACHE_DB") else {
        return;
    };
    let store = ComplianceStore::open(Path::new(&path)).unwrap();
    store
        .escalate(&id("bob", "s2"), "from-child", Sensitivity::Confidential)
        .unwrap();
}
