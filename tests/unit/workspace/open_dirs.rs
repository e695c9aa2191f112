//! Session directories held open between calls (`workspace.open_dirs`): a held handle never
//! outlives the directory it names, a path swapped for a symlink is not followed, and the number
//! held stays within its bound.

use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use bulkhead::workspace::{OPEN_DIR_REVALIDATE, WorkspaceRoot};

use super::id;

/// Calls `step` every 50 ms until it says done; fails with `what` if the held handle is still
/// served well past [`OPEN_DIR_REVALIDATE`] (bounded: 5 s more).
fn until_revalidated(what: &str, mut step: impl FnMut() -> bool) {
    let deadline = Instant::now() + OPEN_DIR_REVALIDATE + Duration::from_secs(5);
    while !step() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_session_directory_removed_while_held_is_made_again_on_the_next_call() {
    let tmp = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::new(tmp.path().join("root")).unwrap();
    let alice = id("alice", "s1");
    root.session(&alice).unwrap().write("a.txt", "one").unwrap();
    assert_eq!(
        root.open_dirs(),
        1,
        "the first call holds its directory open"
    );

    // An operator's clean-up removes the whole session while its handle is held.
    fs::remove_dir_all(tmp.path().join("root/alice/s1")).unwrap();

    let ws = root.session(&alice).unwrap();
    assert!(
        !ws.exists("/workspace/a.txt").unwrap(),
        "the old file is gone"
    );
    ws.write("b.txt", "two").unwrap();
    assert_eq!(
        fs::read_to_string(tmp.path().join("root/alice/s1/b.txt")).unwrap(),
        "two",
        "the write lands in the session's path, not in the removed directory"
    );
}

#[test]
fn a_session_directory_renamed_away_is_left_once_its_handle_is_a_second_old() {
    let tmp = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::new(tmp.path().join("root")).unwrap();
    let alice = id("alice", "s1");
    root.session(&alice).unwrap().write("a.txt", "one").unwrap();
    fs::rename(
        tmp.path().join("root/alice/s1"),
        tmp.path().join("root/alice/moved"),
    )
    .unwrap();

    // Within a second the held handle may still serve the moved directory; after it, the path
    // is opened again: a fresh, empty session directory.
    until_revalidated("a renamed session directory was still served", || {
        let ws = root.session(&alice).unwrap();
        let fresh = !ws.exists("/workspace/a.txt").unwrap();
        if fresh {
            ws.write("b.txt", "two").unwrap();
        }
        fresh
    });
    assert!(tmp.path().join("root/alice/s1/b.txt").exists());
    assert!(!tmp.path().join("root/alice/moved/b.txt").exists());
}

#[test]
fn a_symlink_swapped_in_for_a_held_session_directory_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.txt"), super::CANARY).unwrap();
    let root = WorkspaceRoot::new(tmp.path().join("root")).unwrap();
    let alice = id("alice", "s1");
    root.session(&alice).unwrap().write("a.txt", "one").unwrap();

    // The session directory is swapped for a symlink to a folder outside the root.
    fs::rename(
        tmp.path().join("root/alice/s1"),
        tmp.path().join("root/alice/old"),
    )
    .unwrap();
    symlink(&outside, tmp.path().join("root/alice/s1")).unwrap();

    // While the handle is held it serves the directory it opened (never the link's target);
    // once it is revalidated the link is refused, as on a first open.
    until_revalidated("the planted symlink was never refused", || {
        let Ok(ws) = root.session(&alice) else {
            return true;
        };
        assert!(
            ws.read("/workspace/secret.txt").is_err(),
            "a held session directory followed a planted symlink"
        );
        assert_eq!(ws.read_to_string("/workspace/a.txt").unwrap(), "one");
        false
    });
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        super::CANARY
    );
}

#[test]
fn the_number_of_held_directories_stays_within_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::new(tmp.path().join("root"))
        .unwrap()
        .with_open_dirs(3);
    for s in 0..50 {
        let ws = root.session(&id("alice", &format!("s{s}"))).unwrap();
        ws.write("f.txt", "x").unwrap();
        drop(ws);
        assert!(root.open_dirs() <= 3, "{} held", root.open_dirs());
    }
    // Every earlier session still works (reopened when its handle was let go).
    for s in 0..50 {
        let ws = root.session(&id("alice", &format!("s{s}"))).unwrap();
        assert_eq!(ws.read_to_string("f.txt").unwrap(), "x");
    }

    let none = WorkspaceRoot::new(tmp.path().join("none"))
        .unwrap()
        .with_open_dirs(0);
    none.session(&id("bob", "s1")).unwrap();
    assert_eq!(none.open_dirs(), 0, "0 holds nothing");
}
