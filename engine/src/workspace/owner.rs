//! Who owns workspace files on the host when the server runs as root.
//!
//! # The invariant (enforced here)
//!
//! Under a root server, no file of a workspace belongs to root on the host: the server opens
//! its workspace root through an *idmapped* view (a detached clone of the folder whose idmap
//! maps the host user `workspace.host_uid` to root), so everything it writes there, and
//! everything its jails write (their `/workspace` is a clone of that view), is owned by that
//! unprivileged user on disk. A file a script plants is then at worst that user's, never a root
//! shell, even if a setuid bit got past the jail's filter. Under any other server user nothing
//! changes: files are that user's, and so are a jail's (its user maps to the server's).
//!
//! A folder written before (root-owned entries) is handed to the user once, when the root is
//! opened ([`HostOwner::adopt`]): through the view, a root-owned entry has no owner the server
//! may act for.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use nix::libc;

/// The default `workspace.host_uid`: the `bulkhead` user of the images (uid and gid 10001).
pub const DEFAULT_HOST_UID: u32 = 10001;

/// Folders deeper than this are not walked when adopting (nothing the workspace makes is).
const ADOPT_DEPTH: usize = 64;

/// The idmapping of a root server's workspaces: the host user files belong to, and a user
/// namespace whose map says so (`uid_map`/`gid_map` `<uid> 0 1`).
#[derive(Debug)]
pub struct HostOwner {
    uid: u32,
    userns: OwnedFd,
}

impl HostOwner {
    /// The owner for this process: `Some` when it runs as root, `None` otherwise (its own user
    /// already owns what it and its jails write).
    pub fn for_this_process(uid: u32) -> io::Result<Option<HostOwner>> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        if uid == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "`workspace.host_uid` must not be 0 (root)",
            ));
        }
        Ok(Some(HostOwner {
            uid,
            userns: mapping_namespace(uid)?,
        }))
    }

    /// The host user that owns workspace files.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// A detached, idmapped clone of the folder `dir` (with `nosuid` and `nodev`): paths opened
    /// beneath it create files owned by [`uid`](Self::uid) on disk.
    pub fn view(&self, dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
        let tree = clone_tree(dir)?;
        let attr = libc::mount_attr {
            attr_set: libc::MOUNT_ATTR_IDMAP | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
            attr_clr: 0,
            propagation: 0,
            userns_fd: self.userns.as_raw_fd() as u64,
        };
        // SAFETY: a valid descriptor, an empty path and a mount_attr of the size passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH,
                &attr as *const libc::mount_attr,
                std::mem::size_of::<libc::mount_attr>(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot make an idmapped view of the workspaces (Linux 5.12+ and a file system that supports idmapped mounts are needed under a root server; or run the server as another user): {e}"
                ),
            ));
        }
        Ok(tree)
    }

    /// Hands every entry under `root` (and `root` itself) that is not the user's to it, without
    /// following links; a no-op when `root` is the user's already (the views keep it so).
    pub fn adopt(&self, root: &Path) -> io::Result<()> {
        if std::fs::symlink_metadata(root)?.uid() == self.uid {
            return Ok(());
        }
        self.adopt_tree(root, 0)
    }

    /// Children before their folder, so a crash part way leaves `root` not the user's and the
    /// next start walks again.
    fn adopt_tree(&self, path: &Path, depth: usize) -> io::Result<()> {
        let meta = std::fs::symlink_metadata(path)?;
        if meta.is_dir() && depth < ADOPT_DEPTH {
            for entry in std::fs::read_dir(path)? {
                self.adopt_tree(&entry?.path(), depth + 1)?;
            }
        }
        if meta.uid() != self.uid || meta.gid() != self.uid {
            std::os::unix::fs::lchown(path, Some(self.uid), Some(self.uid))?;
        }
        Ok(())
    }
}

/// A root's idmapping and the empty folder a jail's clone of a session's view is attached over
/// (beside the root, so bubblewrap, which finds a bound folder again by its path, can reach it
/// through folders root owns: it cannot pass through the user's own 0700 ones).
#[derive(Debug)]
pub(crate) struct Idmapped {
    pub owner: std::sync::Arc<HostOwner>,
    pub stage: CString,
}

impl Idmapped {
    /// The idmapping of the root at `root`, making its stage folder if needed.
    pub fn new(owner: std::sync::Arc<HostOwner>, root: &Path) -> io::Result<Idmapped> {
        use std::os::unix::fs::DirBuilderExt as _;
        let parent = root.parent().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "a workspace root has a parent")
        })?;
        let stage = parent.join(".jail-stage");
        match std::fs::DirBuilder::new().mode(0o700).create(&stage) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = std::fs::symlink_metadata(&stage)?;
        if !meta.is_dir() || meta.uid() != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` must be a folder of root's", stage.display()),
            ));
        }
        Ok(Idmapped {
            owner,
            stage: c_path(&stage)?,
        })
    }
}

/// A detached clone of the folder `dir` (a mount of its own, attached nowhere).
pub(crate) fn clone_tree(dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: a valid descriptor and an empty path; the result is a new descriptor we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir.as_raw_fd(),
            c"".as_ptr(),
            libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_EMPTY_PATH as u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open_tree returned a new descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A user namespace whose only mapping is host `uid` ↔ root, held open by descriptor (its
/// first process, `sleep`, is gone once the maps are written).
fn mapping_namespace(uid: u32) -> io::Result<OwnedFd> {
    use std::os::unix::process::CommandExt as _;
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no `sleep` program"))?;
    let mut command = std::process::Command::new(sleep);
    command
        .arg("60")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: unshare is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let proc = format!("/proc/{}", child.id());
    let made = (|| {
        let line = format!("{uid} 0 1\n");
        std::fs::write(format!("{proc}/uid_map"), &line)?;
        std::fs::write(format!("{proc}/gid_map"), &line)?;
        let path = CString::new(format!("{proc}/ns/user").as_bytes())?;
        // SAFETY: a valid C string; the result is a new descriptor we own.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open returned a new descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    })();
    let _ = child.kill();
    let _ = child.wait();
    made
}

/// `path` as a C string (for the jail's set-up after fork, which must not allocate).
pub(crate) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a workspace path"))
}
