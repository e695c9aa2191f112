//! Tampering with the state directory while instances run: a deleted, replaced or truncated lock
//! file, a deleted database, a database rolled back to an older copy. Each may deny service;
//! none may lower a level, and none may crash the process (nothing is memory-mapped).

use super::*;
use bulkhead::state::StateErrorKind;

fn lock_of(db: &Path) -> PathBuf {
    bulkhead::state::sqlite::lock_path(db)
}

/// A store with a cached public session, and the path of its database.
fn running(dir: &Path) -> (StateStore, PathBuf, Identity) {
    let db = dir.join("c.db");
    let store = open(&db);
    let who = id("alice", "s1");
    for _ in 0..3 {
        assert_eq!(level(&store, &who).unwrap(), Sensitivity::Public);
    }
    (store, db, who)
}

fn assert_refuses(store: &StateStore, who: &Identity, what: &str) {
    let e = level(store, who).expect_err(what);
    assert!(
        matches!(e.kind(), StateErrorKind::Tampered | StateErrorKind::Missing),
        "{what}: {e}"
    );
    assert!(
        rt().block_on(store.raise(who, "d", Sensitivity::Internal))
            .is_err(),
        "{what}"
    );
}

#[test]
fn a_deleted_lock_file_stops_the_running_store_and_a_new_one_sees_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let (old, db, who) = running(dir.path());
    std::fs::remove_file(lock_of(&db)).unwrap();
    assert_refuses(&old, &who, "lock file deleted");
    // A restarted instance recreates the lock file; its escalation is never hidden from the old
    // process, which keeps refusing instead of answering its cached `public`.
    let new = open_existing(&db).unwrap();
    raise(&new, &who, "crm", Sensitivity::Confidential);
    assert_refuses(&old, &who, "after another process escalated");
    assert_eq!(level(&new, &who).unwrap(), Sensitivity::Confidential);
}

#[test]
fn a_replaced_lock_file_stops_the_running_store() {
    let dir = tempfile::tempdir().unwrap();
    let (old, db, who) = running(dir.path());
    let lock = lock_of(&db);
    let copy = dir.path().join("copy.lock");
    std::fs::copy(&lock, &copy).unwrap();
    std::fs::rename(&copy, &lock).unwrap();
    assert_refuses(&old, &who, "lock file replaced by a copy");
    // Replaced with a hard link kept elsewhere first, then a copy: the inode still differs.
    let (old, db, who) = running(&dir.path().join("b"));
    let lock = lock_of(&db);
    std::fs::hard_link(&lock, dir.path().join("b/kept")).unwrap();
    let copy = dir.path().join("b/copy.lock");
    std::fs::copy(&lock, &copy).unwrap();
    std::fs::rename(&copy, &lock).unwrap();
    assert_refuses(&old, &who, "linked, then replaced");
}

#[test]
fn a_truncated_lock_file_fails_closed_without_a_crash() {
    for len in [0u64, 8, 100, 4096, 4100, 300_000] {
        let dir = tempfile::tempdir().unwrap();
        let (old, db, who) = running(dir.path());
        let lock = lock_of(&db);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&lock)
            .unwrap()
            .set_len(len)
            .unwrap();
        // The old code mapped this file and died with SIGBUS on the next call; this process
        // running on is part of the assertion.
        assert_refuses(&old, &who, &format!("truncated to {len}"));
        let e = open_existing(&db)
            .map(|_| ())
            .expect_err("a short lock file is refused");
        assert_eq!(e.kind(), StateErrorKind::Tampered, "{e}");
    }
}

#[test]
fn a_filled_lock_file_may_deny_service_but_never_lowers() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db, who) = running(dir.path());
    raise(&store, &who, "crm", Sensitivity::Confidential);
    // Every counter and the high-water mark overwritten with 0xff.
    let lock = lock_of(&db);
    let len = std::fs::metadata(&lock).unwrap().len() as usize;
    let mut bytes = std::fs::read(&lock).unwrap();
    for b in &mut bytes[48..len] {
        *b = 0xff;
    }
    std::fs::write(&lock, &bytes).unwrap();
    match level(&store, &who) {
        Ok(l) => assert_eq!(l, Sensitivity::Confidential),
        Err(e) => assert_eq!(e.kind(), StateErrorKind::Tampered, "{e}"),
    }
}

#[test]
fn a_deleted_database_cannot_be_written_and_is_not_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db, who) = running(dir.path());
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let e = rt()
        .block_on(store.raise(&who, "crm", Sensitivity::Confidential))
        .expect_err("an escalation into a deleted database must fail");
    println!("escalation after delete: {e}");
    assert!(!db.exists(), "the store was silently recreated");
    let e = open_existing(&db).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), StateErrorKind::Missing, "{e}");
}

#[test]
fn a_database_rolled_back_to_an_older_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let who = id("alice", "s1");
    {
        let store = open(&db);
        raise(&store, &who, "notes", Sensitivity::Internal);
    }
    let backup = dir.path().join("backup.db");
    std::fs::copy(&db, &backup).unwrap();
    {
        let store = open_existing(&db).unwrap();
        raise(&store, &who, "crm", Sensitivity::Confidential);
    }
    // Put the older copy back (as a restore from backup would), then start an instance.
    std::fs::rename(&backup, &db).unwrap();
    let store = open_existing(&db).unwrap();
    let e = level(&store, &who).expect_err("a rolled-back store must not answer `internal`");
    assert_eq!(e.kind(), StateErrorKind::Tampered, "{e}");
    assert!(e.detail().contains("rolled back"), "{e}");
}
