//! Ordinary use keeps working: nested dirs, inside symlinks, unicode names, listings, limits,
//! result paths, atomic replace, modes and error messages.

use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{PermissionsExt as _, symlink};

use bulkhead::errors::ToolError;
use bulkhead::workspace::{AGENT_ROOT, DirEntryInfo, WorkspaceError, WorkspaceRoot};

use super::{Fixture, id};

#[test]
fn nested_dirs_unicode_and_root_listing() {
    let fx = Fixture::new();
    let ws = &fx.ws;
    ws.write("/workspace/notes/2026/nov/a.txt", "alpha")
        .unwrap();
    ws.write("notes/b.txt", "beta").unwrap();
    ws.write("/workspace/café/日本語 ファイル.md", "ユニコード")
        .unwrap();
    ws.write("emoji 😀.txt", [0xff, 0x00, 0x01]).unwrap();
    ws.write("%2e%2e", "literal percent name").unwrap();
    assert_eq!(ws.read_to_string("notes/2026/nov/a.txt").unwrap(), "alpha");
    assert_eq!(
        ws.read_to_string("/workspace/café/日本語 ファイル.md")
            .unwrap(),
        "ユニコード"
    );
    assert_eq!(
        ws.read("/workspace/emoji 😀.txt").unwrap(),
        vec![0xff, 0x00, 0x01]
    );
    assert!(matches!(
        ws.read_to_string("emoji 😀.txt"),
        Err(WorkspaceError::WrongType { .. })
    ));
    // Host layout: <root>/<user>/<session>/<rel>.
    assert_eq!(
        fs::read_to_string(fx.session_host.join("%2e%2e")).unwrap(),
        "literal percent name"
    );

    let root = ws.list(AGENT_ROOT).unwrap();
    let names: Vec<&str> = root.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["%2e%2e", "café", "emoji 😀.txt", "notes"]);
    assert_eq!(ws.list("/workspace/").unwrap(), root);
    assert_eq!(ws.list("").unwrap(), root);
    assert_eq!(
        ws.list("notes").unwrap(),
        vec![
            DirEntryInfo {
                name: "2026".into(),
                is_dir: true,
                size: 0
            },
            DirEntryInfo {
                name: "b.txt".into(),
                is_dir: false,
                size: 4
            },
        ]
    );
    assert!(ws.exists("notes/b.txt").unwrap());
    assert!(!ws.exists("notes/missing").unwrap());
    ws.remove("notes/2026").unwrap();
    assert!(!ws.exists("notes/2026/nov/a.txt").unwrap());
    assert!(matches!(
        ws.remove("/workspace"),
        Err(WorkspaceError::Invalid { .. })
    ));
    assert!(matches!(
        ws.read("notes/missing"),
        Err(WorkspaceError::NotFound { .. })
    ));
    assert!(matches!(
        ws.read("notes"),
        Err(WorkspaceError::WrongType { .. })
    ));
}

#[test]
fn symlinks_that_stay_inside_work() {
    let fx = Fixture::new();
    let ws = &fx.ws;
    ws.write("notes/a.txt", "target").unwrap();
    let s = &fx.session_host;
    symlink("notes/a.txt", s.join("alias")).unwrap();
    symlink("notes", s.join("notes-link")).unwrap();
    symlink("..", s.join("notes/up")).unwrap(); // the session root, still inside
    symlink("../notes/a.txt", s.join("notes/sib")).unwrap();
    symlink("alias", s.join("alias2")).unwrap(); // relative chain
    for p in [
        "alias",
        "alias2",
        "notes-link/a.txt",
        "notes/up/notes/a.txt",
        "/workspace/notes/sib",
    ] {
        assert_eq!(ws.read_to_string(p).unwrap(), "target", "{p}");
    }
    let listed = ws.list("notes").unwrap();
    let up = listed.iter().find(|e| e.name == "up").unwrap();
    assert!(up.is_dir);
    let sib = listed.iter().find(|e| e.name == "sib").unwrap();
    assert_eq!((sib.is_dir, sib.size), (false, 6));
    ws.append("alias", "+more").unwrap();
    assert_eq!(ws.read_to_string("notes/a.txt").unwrap(), "target+more");
    // Writing to a symlink path replaces the link itself (atomic rename), not its target.
    ws.write("alias2", "replaced").unwrap();
    assert!(
        !fs::symlink_metadata(s.join("alias2"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(ws.read_to_string("notes/a.txt").unwrap(), "target+more");
    // Removing a symlink to a directory removes the link only.
    ws.remove("notes-link").unwrap();
    assert!(ws.exists("notes/a.txt").unwrap());
}

#[test]
fn create_append_open_stream() {
    let fx = Fixture::new();
    let ws = &fx.ws;
    let mut f = ws.create("/workspace/out/stream.log").unwrap();
    f.write_all(b"one\n").unwrap();
    drop(f);
    ws.append("out/stream.log", "two\n").unwrap();
    let mut buf = String::new();
    ws.open("out/stream.log")
        .unwrap()
        .read_to_string(&mut buf)
        .unwrap();
    assert_eq!(buf, "one\ntwo\n");
    // create truncates an existing file.
    drop(ws.create("out/stream.log").unwrap());
    assert_eq!(ws.read("out/stream.log").unwrap(), b"");
    assert!(matches!(
        ws.write("/workspace", "x"),
        Err(WorkspaceError::Invalid { .. })
    ));
    assert!(matches!(
        ws.write("out", "x"),
        Err(WorkspaceError::WrongType { .. })
    ));
    // A FIFO planted in the workspace neither hangs nor is read.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fx.session_host.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(matches!(
        ws.read("fifo"),
        Err(WorkspaceError::WrongType { .. })
    ));
    assert!(ws.append("fifo", "x").is_err());
}

#[test]
fn read_limit_is_enforced() {
    let tmp = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::new(tmp.path().join("r"))
        .unwrap()
        .with_max_read_bytes(10);
    let ws = root.session(&id("u", "s")).unwrap();
    ws.write("ten", "0123456789").unwrap();
    ws.write("eleven", "0123456789a").unwrap();
    assert_eq!(ws.read("ten").unwrap().len(), 10);
    let err = ws.read("eleven").unwrap_err();
    assert!(
        matches!(
            err,
            WorkspaceError::TooLarge {
                size: 11,
                limit: 10,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert_eq!(ws.max_read_bytes(), 10);
}

#[test]
fn modes_are_private() {
    let fx = Fixture::new();
    fx.ws.write("d/f.txt", "x").unwrap();
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&fx.base.join("root")), 0o700);
    assert_eq!(mode(&fx.base.join("root/alice")), 0o700);
    assert_eq!(mode(&fx.session_host), 0o700);
    assert_eq!(mode(&fx.session_host.join("d")), 0o700);
    assert_eq!(mode(&fx.session_host.join("d/f.txt")), 0o600);
}

#[test]
fn errors_name_agent_paths_never_host_paths() {
    let fx = Fixture::new();
    symlink("../../../outside", fx.session_host.join("out")).unwrap();
    fx.ws.write("dir/x", "x").unwrap();
    let host = fx.base.to_string_lossy().into_owned();
    let errors = [
        fx.ws.read("missing.txt").unwrap_err(),
        fx.ws.read("out/canary-outside.txt").unwrap_err(),
        fx.ws.read("dir").unwrap_err(),
        fx.ws.read("../x").unwrap_err(),
        fx.ws.write("out/new", "x").unwrap_err(),
        fx.ws.list("out").unwrap_err(),
    ];
    for e in &errors {
        let text = e.to_string();
        assert!(!text.contains(&host), "host path leaked: {text}");
        let debug = format!("{e:?}");
        assert!(!debug.contains(&host), "host path leaked: {debug}");
    }
    assert_eq!(
        errors[0].to_string(),
        "/workspace/missing.txt: no such file or directory"
    );
    assert!(
        errors[1]
            .to_string()
            .starts_with("/workspace/out/canary-outside.txt: refused")
    );
    // Escapes are fatal for the tool layer, bad paths are retryable.
    assert!(ToolError::from(fx.ws.read("out/x").unwrap_err()).is_fatal());
    assert!(!ToolError::from(fx.ws.read("../x").unwrap_err()).is_fatal());
}

#[test]
fn atomic_write_never_shows_a_mix() {
    let fx = Fixture::new();
    let a = vec![b'A'; 256 * 1024];
    let b = vec![b'B'; 256 * 1024];
    fx.ws.write("big.bin", &a).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let got = fx.ws.read("big.bin").unwrap();
                assert!(got == a || got == b, "torn read of {} bytes", got.len());
                reads += 1;
            }
            reads
        });
        for i in 0..200 {
            fx.ws
                .write("big.bin", if i % 2 == 0 { &b } else { &a })
                .unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let names: Vec<_> = fx
        .ws
        .list("")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["big.bin"], "temp files left behind");
    let on_disk: Vec<_> = fs::read_dir(&fx.session_host)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(on_disk.len(), 1, "{on_disk:?}");
}
