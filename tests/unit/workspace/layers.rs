//! Per-mode workspace layers: an instance writes its own root and reads the roots of less
//! isolated instances, so a session that moved up keeps its earlier files, and nothing it does
//! there changes the lower layer.

use std::fs;

use bulkhead::workspace::{WorkspaceError, WorkspaceRoot};

use super::id;

#[test]
fn a_session_that_moved_up_reads_its_earlier_files_and_never_writes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let full_root = tmp.path().join("template");
    let proxied_root = tmp.path().join("template.proxied");
    let none_root = tmp.path().join("template.none");
    let alice = id("alice", "s1");

    // Written on the full instance before the session moved up.
    let full = WorkspaceRoot::new(&full_root)
        .unwrap()
        .session(&alice)
        .unwrap();
    full.write("notes/plan.txt", "from full").unwrap();
    full.write("shared.txt", "full version").unwrap();

    let proxied = WorkspaceRoot::new(&proxied_root)
        .unwrap()
        .with_lower(vec![full_root.clone()])
        .session(&alice)
        .unwrap();
    assert_eq!(
        proxied.read_to_string("notes/plan.txt").unwrap(),
        "from full"
    );
    assert!(proxied.exists("/workspace/notes").unwrap());
    // A write shadows the lower file; the lower layer keeps its own.
    proxied.write("shared.txt", "proxied version").unwrap();
    proxied.write("notes/secret.txt", "only up here").unwrap();
    assert_eq!(
        proxied.read_to_string("shared.txt").unwrap(),
        "proxied version"
    );
    assert_eq!(
        fs::read_to_string(full_root.join("alice/s1/shared.txt")).unwrap(),
        "full version"
    );
    assert!(!full_root.join("alice/s1/notes/secret.txt").exists());
    // Listings merge, this layer first.
    let names: Vec<String> = proxied
        .list("notes")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["plan.txt", "secret.txt"]);
    // A lower file cannot be removed from here.
    let err = proxied.remove("notes/plan.txt").unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid { reason } if reason.contains("read-only here")),
        "{err:?}"
    );
    assert!(full_root.join("alice/s1/notes/plan.txt").exists());

    // The isolated instance sees both lower layers, nearest first.
    let none = WorkspaceRoot::new(&none_root)
        .unwrap()
        .with_lower(vec![proxied_root.clone(), full_root.clone()])
        .session(&alice)
        .unwrap();
    assert_eq!(
        none.read_to_string("shared.txt").unwrap(),
        "proxied version"
    );
    assert_eq!(none.read_to_string("notes/plan.txt").unwrap(), "from full");

    // The full instance never sees what was written above it.
    assert!(!full.exists("notes/secret.txt").unwrap());
    assert!(matches!(
        full.read("notes/secret.txt"),
        Err(WorkspaceError::NotFound { .. })
    ));
    // Another session sees nothing of alice/s1 in any layer.
    let other = WorkspaceRoot::new(&proxied_root)
        .unwrap()
        .with_lower(vec![full_root.clone()])
        .session(&id("alice", "s2"))
        .unwrap();
    assert!(!other.exists("notes/plan.txt").unwrap());
}

#[test]
fn a_symlinked_session_folder_in_a_lower_layer_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let full_root = tmp.path().join("template");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(full_root.join("alice")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("loot.txt"), super::CANARY).unwrap();
    std::os::unix::fs::symlink(&outside, full_root.join("alice/s1")).unwrap();
    let proxied = WorkspaceRoot::new(tmp.path().join("template.proxied"))
        .unwrap()
        .with_lower(vec![full_root])
        .session(&id("alice", "s1"))
        .unwrap();
    assert!(!proxied.exists("loot.txt").unwrap());
    assert!(proxied.read("loot.txt").is_err());
}

#[test]
fn the_byte_and_file_limits_bound_the_session_across_its_layers() {
    // A session that writes up to the limit on each instance it moves to must not hold three
    // times the limit in all.
    let tmp = tempfile::tempdir().unwrap();
    let limits = bulkhead::workspace::DiskLimits {
        max_bytes: 10_000,
        max_files: 3,
        ..Default::default()
    };
    let roots: Vec<std::path::PathBuf> = ["template", "template.proxied", "template.none"]
        .iter()
        .map(|r| tmp.path().join(r))
        .collect();
    let alice = id("alice", "s1");
    let layer = |i: usize| {
        let lower: Vec<_> = roots[..i].iter().rev().cloned().collect();
        WorkspaceRoot::new(&roots[i])
            .unwrap()
            .with_lower(lower)
            .with_limits(limits)
            .session(&alice)
            .unwrap()
    };
    layer(0).write("a.txt", vec![b'a'; 6_000]).unwrap();
    let proxied = layer(1);
    assert_eq!(proxied.usage().unwrap().bytes, 6_000);
    let e = proxied.write("b.txt", vec![b'b'; 6_000]).unwrap_err();
    assert!(e.to_string().contains("workspace.max_bytes"), "{e}");
    proxied.write("b.txt", vec![b'b'; 3_000]).unwrap();
    let none = layer(2);
    let e = none.write("c.txt", vec![b'c'; 2_000]).unwrap_err();
    assert!(e.to_string().contains("workspace.max_bytes"), "{e}");
    none.write("c.txt", vec![b'c'; 500]).unwrap();
    let e = none.write("d.txt", vec![b'd'; 10]).unwrap_err();
    assert!(e.to_string().contains("workspace.max_files"), "{e}");
    assert_eq!(
        none.usage().unwrap(),
        bulkhead::workspace::Usage {
            bytes: 9_500,
            files: 3
        }
    );
}
