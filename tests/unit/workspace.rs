//! Workspace confinement on real directories: traversal payloads, a symlink-swap race, isolation
//! between users and sessions, and the ordinary paths that must keep working.

mod layers;
mod legit;
mod open_dirs;
mod quota;
mod race;
mod traversal;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::{Path, PathBuf};

use bulkhead::identity::Identity;
use bulkhead::workspace::{SessionWorkspace, WorkspaceRoot};
use rustix::fs::{AtFlags, CWD, Timespec, Timestamps, utimensat};

/// Marker carried by every file planted outside the session under test.
pub const CANARY: &str = "CANARY-7f3a";

/// Access time planted on canaries: any read moves it (relatime updates when atime < mtime).
const OLD_ATIME: i64 = 1_000_000_000;
const NEW_MTIME: i64 = 1_700_000_000;

/// A temp tree: `<base>/root` is the workspace root, alice/s1 the session under test, and canaries
/// planted everywhere else (another user, another session, the user dir, outside the root).
pub struct Fixture {
    pub _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: WorkspaceRoot,
    pub ws: SessionWorkspace,
    pub session_host: PathBuf,
    pub canaries: Vec<PathBuf>,
    /// Whether reading a file visibly moves its atime here (checked on a control file).
    pub atime_live: bool,
}

pub fn id(user: &str, session: &str) -> Identity {
    Identity::new(user, session).expect("valid identity")
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical tempdir");
        let root = WorkspaceRoot::new(base.join("root")).expect("workspace root");
        let ws = root.session(&id("alice", "s1")).expect("alice/s1");
        // Sibling sessions exist before the canaries are planted in them.
        root.session(&id("alice", "s2")).expect("alice/s2");
        root.session(&id("bob", "s1")).expect("bob/s1");
        let session_host = base.join("root/alice/s1");
        assert_eq!(ws.host_path(), session_host);
        let planted = [
            "outside/canary-outside.txt",
            "outside/sub/deep-canary.txt",
            "outside/hard-canary.txt",
            "outside/f.txt",
            "canary-base.txt",
            "root/alice/user-canary.txt",
            "root/alice/s2/s2-canary.txt",
            "root/bob/s1/bob-canary.txt",
        ];
        let mut canaries = Vec::new();
        for rel in planted {
            let p = base.join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(&p, format!("{CANARY} {rel}\n")).expect("plant canary");
            canaries.push(p);
        }
        let control = base.join("atime-control.txt");
        fs::write(&control, "control").expect("control");
        age(&control);
        fs::read(&control).expect("read control");
        let atime_live = fs::metadata(&control).expect("stat").atime() != OLD_ATIME;
        if !atime_live {
            eprintln!("note: atime does not move on this mount; read detection uses content only");
        }
        for c in &canaries {
            age(c);
        }
        Fixture {
            _tmp: tmp,
            base,
            root,
            ws,
            session_host,
            canaries,
            atime_live,
        }
    }

    /// Every file, directory and symlink outside the session under test, with content or target.
    pub fn outside_snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        walk(&self.base, &self.base, &self.session_host, &mut out);
        out
    }

    /// Asserts no canary was read (atime unchanged), when the mount makes that observable.
    pub fn assert_canaries_unread(&self, context: &str) {
        if !self.atime_live {
            return;
        }
        for c in &self.canaries {
            let atime = fs::metadata(c).expect("stat canary").atime();
            assert_eq!(atime, OLD_ATIME, "{context}: canary {c:?} was read");
        }
    }
}

/// Sets atime far before mtime so that the next read updates it.
pub fn age(path: &Path) {
    let ts = Timestamps {
        last_access: Timespec {
            tv_sec: OLD_ATIME,
            tv_nsec: 0,
        },
        last_modification: Timespec {
            tv_sec: NEW_MTIME,
            tv_nsec: 0,
        },
    };
    utimensat(CWD, path, &ts, AtFlags::SYMLINK_NOFOLLOW).expect("set times");
}

fn walk(base: &Path, dir: &Path, skip: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p == skip {
            continue;
        }
        let meta = fs::symlink_metadata(&p).expect("lstat");
        let rel = p.strip_prefix(base).expect("under base").to_path_buf();
        let desc = if meta.file_type().is_symlink() {
            format!("link -> {:?}", fs::read_link(&p).expect("readlink"))
        } else if meta.is_dir() {
            walk(base, &p, skip, out);
            format!("dir {:o}", meta.mode())
        } else {
            let bytes = read_noatime(&p);
            format!(
                "file {:o} mtime {} {:?}",
                meta.mode(),
                meta.mtime(),
                String::from_utf8_lossy(&bytes)
            )
        };
        out.insert(rel, desc);
    }
}

/// Reads a file without moving its atime (`O_NOATIME`), so snapshots do not look like reads.
pub fn read_noatime(path: &Path) -> Vec<u8> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOATIME.bits() as i32)
        .open(path)
        .expect("open O_NOATIME");
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).expect("read");
    buf
}

/// Plants a symlink inside the session as a hostile tool would, replacing whatever is there.
pub fn plant_link(session_host: &Path, name: &str, target: &Path) {
    let p = session_host.join(name);
    if let Ok(meta) = fs::symlink_metadata(&p) {
        if meta.is_dir() {
            fs::remove_dir_all(&p).expect("clear dir");
        } else {
            fs::remove_file(&p).expect("clear file");
        }
    }
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    symlink(target, &p).expect("symlink");
}

#[test]
fn sessions_are_isolated_between_users_and_sessions() {
    let fx = Fixture::new();
    let bob = fx.root.session(&id("bob", "s1")).unwrap();
    let alice2 = fx.root.session(&id("alice", "s2")).unwrap();
    for (ws, who) in [
        (&fx.ws, "alice-s1"),
        (&bob, "bob-s1"),
        (&alice2, "alice-s2"),
    ] {
        ws.write("/workspace/notes/who.txt", who).unwrap();
    }
    let expected = [
        (&fx.ws, "alice-s1", vec!["notes"]),
        (&bob, "bob-s1", vec!["bob-canary.txt", "notes"]),
        (&alice2, "alice-s2", vec!["notes", "s2-canary.txt"]),
    ];
    for (ws, who, own) in expected {
        assert_eq!(ws.read_to_string("/workspace/notes/who.txt").unwrap(), who);
        let names: Vec<_> = ws
            .list("/workspace")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, own, "{who} sees another session's files");
    }
    assert_eq!(
        fs::read_to_string(fx.base.join("root/bob/s1/notes/who.txt")).unwrap(),
        "bob-s1"
    );
    // Every way of naming another session is refused before or at open time.
    for p in [
        "../../alice/s1/notes/who.txt",
        "/workspace/../../alice/s1/notes/who.txt",
        "../s2/notes/who.txt",
        "/workspace/../s2/notes/who.txt",
    ] {
        assert!(bob.read(p).is_err(), "bob read {p}");
        assert!(fx.ws.read(p).is_err(), "alice/s1 read {p}");
    }
    // A symlink planted in bob's session towards alice's is refused when followed.
    plant_link(bob.host_path(), "to-alice", Path::new("../../alice/s1"));
    let err = bob.read("to-alice/notes/who.txt").unwrap_err();
    assert!(
        matches!(err, bulkhead::workspace::WorkspaceError::Escape { .. }),
        "{err}"
    );
    // A fresh handle on the same identity sees the same files.
    let again = fx.root.session(&id("alice", "s1")).unwrap();
    assert_eq!(again.read_to_string("notes/who.txt").unwrap(), "alice-s1");
}

#[test]
fn symlinked_session_or_user_directory_is_refused() {
    let fx = Fixture::new();
    // A user directory that is a symlink to another user's is not followed.
    symlink("bob", fx.base.join("root/mallory")).unwrap();
    assert!(fx.root.session(&id("mallory", "s1")).is_err());
    symlink("s1", fx.base.join("root/alice/s3")).unwrap();
    assert!(fx.root.session(&id("alice", "s3")).is_err());
    symlink(fx.base.join("outside"), fx.base.join("root/alice/s4")).unwrap();
    assert!(fx.root.session(&id("alice", "s4")).is_err());
}
