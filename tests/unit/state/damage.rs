//! Damaged stores fail closed: garbage, truncation, a foreign schema, out-of-range levels and
//! unreachable paths are refused, and never overwritten with a fresh, public store.

use super::*;
use bulkhead::state::StateErrorKind;
use rand::Rng;

fn assert_fails_closed(path: &Path, what: &str) -> StateError {
    let before = std::fs::read(path).ok();
    let e = match open_existing(path) {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => e,
    };
    assert_eq!(e.fail_closed_level(), Sensitivity::Secret);
    assert_eq!(
        std::fs::read(path).ok(),
        before,
        "{what}: the file was changed"
    );
    e
}

#[test]
fn garbage_file_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let mut garbage = vec![0u8; 16 * 1024];
    rand::rng().fill(&mut garbage[..]);
    std::fs::write(&path, &garbage).unwrap();
    let e = assert_fails_closed(&path, "garbage");
    assert!(matches!(e.kind(), StateErrorKind::Corrupt), "{e}");
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
    let store = open_existing(&path).unwrap();
    assert_eq!(
        level(&store, &id("alice", "s1")).unwrap(),
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
    let e = assert_fails_closed(&other, "foreign sqlite file");
    assert!(matches!(e.kind(), StateErrorKind::Schema), "{e}");

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
    let store = open_existing(&path).unwrap();
    // Damage a row behind the open store's back (another process, a careless admin).
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER sessions_never_lower; PRAGMA ignore_check_constraints = ON;
         UPDATE sessions SET level = -1 WHERE session = 's1';",
    )
    .unwrap();
    drop(conn);
    let e = level(&store, &id("alice", "s1")).unwrap_err();
    assert!(matches!(e.kind(), StateErrorKind::Corrupt), "{e}");
    assert!(rt().block_on(store.record(&id("alice", "s1"))).is_err());
    assert_eq!(
        rt().block_on(store.peek(&id("alice", "s1"))),
        Sensitivity::Secret
    );
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
    assert!(
        open_existing(&file.join("c.db")).is_err(),
        "parent is a file"
    );
    // The path is a directory.
    let as_dir = dir.path().join("is-a-dir.db");
    std::fs::create_dir(&as_dir).unwrap();
    assert!(open_existing(&as_dir).is_err(), "path is a directory");
    // A symlink planted at the path is not followed.
    let real = secret_store(dir.path());
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(open_existing(&link).is_err(), "path is a symlink");
    // Mode 000 stops everyone but root; root bypasses it, so only check it where it bites.
    if !rustix::process::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert!(open_existing(&real).is_err(), "file mode 000");
    }
}

#[test]
fn a_version_one_store_is_migrated_in_place_and_keeps_its_levels() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE sessions (user TEXT NOT NULL, session TEXT NOT NULL,
             level INTEGER NOT NULL CHECK (level BETWEEN 0 AND 3), updated_at TEXT NOT NULL,
             PRIMARY KEY (user, session)) WITHOUT ROWID;
         CREATE TABLE datasets (user TEXT NOT NULL, session TEXT NOT NULL, name TEXT NOT NULL,
             level INTEGER NOT NULL CHECK (level BETWEEN 0 AND 3), first_seen TEXT NOT NULL,
             PRIMARY KEY (user, session, name)) WITHOUT ROWID;
         INSERT INTO sessions VALUES ('alice', 's1', 2, 'then');
         PRAGMA application_id = 1112040307; PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    let store = open_existing(&path).unwrap();
    assert_eq!(
        level(&store, &id("alice", "s1")).unwrap(),
        Sensitivity::Confidential
    );
    assert_eq!(store.store_id().len(), 32);
}
