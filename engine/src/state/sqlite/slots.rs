//! The lock file beside a SQLite store: per-session locks and change counters shared by every
//! process on the host, and the store's generation high-water mark.
//!
//! Layout: a 64-byte header (magic, store id, generation high-water mark at byte 48), then from
//! byte 4096 one 8-byte slot per session hash bucket. A session's lock is an open-file-description
//! (OFD) byte-range lock on its slot's 8 bytes, and the slot holds the session's change counter,
//! written only under the exclusive lock. OFD locks belong to an open file, not to a process, so
//! two calls of one process exclude each other like two processes do, and the kernel drops them
//! when the holder dies. Nothing is memory-mapped: a truncated file reads short and fails closed.

use crate::state::{PassMode, StateError, StateErrorKind};
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"BHSLOT01";
const STORE_ID_AT: u64 = 8;
const STORE_ID_LEN: usize = 32;
const HIGH_WATER_AT: u64 = 48;
const SLOTS_AT: u64 = 4096;
/// Session hash buckets. Two sessions in one bucket share a lock and a counter: they may wait for
/// each other or miss the cache, never see each other's levels.
pub const SLOTS: u64 = 1 << 16;
/// The file's size.
pub const FILE_LEN: u64 = SLOTS_AT + SLOTS * 8;
/// Escalation intents: one byte per bucket past the end of the file (a lock beyond the end
/// changes nothing in the file). A call waiting for a session's lock exclusively holds its
/// bucket's intent byte, so work that would hold the session for long (a sandbox run) can see
/// that an escalation waits for it and stop.
const INTENT_AT: u64 = FILE_LEN;
/// Idle descriptors kept for reuse.
const POOL_MAX: usize = 64;

/// The open lock file: its identity as first opened, and descriptors to lock through.
pub struct SlotFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
    pool: Mutex<Vec<File>>,
    /// The state directory, held open: the per-call check looks the file name up in it (one
    /// component, no path walk).
    dir: std::os::fd::OwnedFd,
    name: std::ffi::CString,
    /// When the whole path was last checked (ms since `epoch`).
    path_checked_ms: std::sync::atomic::AtomicU64,
    epoch: Instant,
}

/// How often the whole path is looked up again (it catches a replaced state directory).
const PATH_CHECK_EVERY: Duration = Duration::from_millis(50);

/// A held lock on one slot. Dropping it unlocks the slot and returns the descriptor for reuse.
pub struct SlotHold {
    file: Option<File>,
    offset: u64,
    owner: Arc<SlotFile>,
}

impl Drop for SlotHold {
    fn drop(&mut self) {
        if let Some(file) = self.file.take()
            && set_lock(&file, libc::F_UNLCK, self.offset, 8).is_ok()
        {
            self.owner.give_back(file);
        }
        // On failure the descriptor is closed, which releases its locks.
    }
}

impl SlotHold {
    pub(super) fn file(&self) -> &File {
        self.file.as_ref().expect("held until drop")
    }

    /// The slot's change counter (read under the held lock).
    pub fn counter(&self) -> Result<u64, StateError> {
        read_u64(self.file(), self.offset, &self.owner.path)
    }

    /// Whether a call waits for this slot exclusively (an escalation of one of its sessions).
    pub fn escalation_waiting(&self) -> Result<bool, StateError> {
        let slot = (self.offset - SLOTS_AT) / 8;
        // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = (INTENT_AT + slot) as libc::off_t;
        fl.l_len = 1;
        fcntl(self.file(), FcntlArg::F_OFD_GETLK(&mut fl))
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &self.owner.path, e))?;
        Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
    }

    /// Bumps the counter; the hold must be exclusive. Returns the new value.
    pub fn bump(&self) -> Result<u64, StateError> {
        let next = self.counter()?.wrapping_add(1);
        self.file()
            .write_at(&next.to_le_bytes(), self.offset)
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &self.owner.path, e))?;
        Ok(next)
    }

    /// Turns an exclusive hold into a shared one without letting go (atomic in the kernel).
    pub fn downgrade(&self) -> Result<(), StateError> {
        set_lock(self.file(), libc::F_RDLCK, self.offset, 8)
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &self.owner.path, e))
    }

    /// The generation high-water mark, read under a shared lock of its bytes.
    pub fn high_water(&self, timeout: Duration) -> Result<u64, StateError> {
        let file = self.file();
        lock_wait(
            file,
            libc::F_RDLCK,
            HIGH_WATER_AT,
            8,
            timeout,
            &self.owner.path,
        )?;
        let v = read_u64(file, HIGH_WATER_AT, &self.owner.path);
        let _ = set_lock(file, libc::F_UNLCK, HIGH_WATER_AT, 8);
        v
    }

    /// Raises the high-water mark to at least `generation`.
    pub fn raise_high_water(&self, generation: u64, timeout: Duration) -> Result<(), StateError> {
        let file = self.file();
        lock_wait(
            file,
            libc::F_WRLCK,
            HIGH_WATER_AT,
            8,
            timeout,
            &self.owner.path,
        )?;
        let result = read_u64(file, HIGH_WATER_AT, &self.owner.path).and_then(|hw| {
            if generation > hw {
                file.write_at(&generation.to_le_bytes(), HIGH_WATER_AT)
                    .map(|_| ())
                    .map_err(|e| StateError::io(StateErrorKind::Unavailable, &self.owner.path, e))
            } else {
                Ok(())
            }
        });
        let _ = set_lock(file, libc::F_UNLCK, HIGH_WATER_AT, 8);
        result
    }
}

impl SlotFile {
    /// Creates the lock file for store `store_id` at `path` unless one exists (atomically: built
    /// under a temporary name and hard-linked into place).
    pub fn create(path: &Path, store_id: &str, high_water: u64) -> Result<(), StateError> {
        // A name no other process uses: process ids repeat across containers sharing the
        // volume (each instance is pid 1 of its own namespace), and a shared name let one
        // process delete another's file before it was linked into place.
        let tmp = path.with_file_name(format!(
            ".{}.init-{}-{}",
            path.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id(),
            crate::state::new_store_id()
        ));
        let err = |e| StateError::io(StateErrorKind::Unavailable, &tmp, e);
        let result = (|| {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(err)?;
            let mut header = [0u8; 64];
            header[..8].copy_from_slice(MAGIC);
            let id = store_id.as_bytes();
            let n = id.len().min(STORE_ID_LEN);
            header[8..8 + n].copy_from_slice(&id[..n]);
            header[48..56].copy_from_slice(&high_water.to_le_bytes());
            f.write_all_at(&header, 0).map_err(err)?;
            f.set_len(FILE_LEN).map_err(err)?;
            f.sync_all().map_err(err)?;
            match std::fs::hard_link(&tmp, path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(StateError::io(StateErrorKind::Unavailable, path, e)),
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        result
    }

    /// Opens the lock file of store `store_id`; refuses a file of another store, a short file, a
    /// symlink, or anything that is not a regular file.
    pub fn open(path: &Path, store_id: &str) -> Result<Arc<SlotFile>, StateError> {
        let file = open_raw(path)?;
        let meta = file
            .metadata()
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, path, e))?;
        if !meta.is_file() || meta.len() < FILE_LEN {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!(
                    "{}: lock file is {} bytes, expected {FILE_LEN}",
                    path.display(),
                    meta.len()
                ),
            ));
        }
        let mut header = [0u8; 64];
        file.read_exact_at(&mut header, 0)
            .map_err(|e| StateError::io(StateErrorKind::Tampered, path, e))?;
        let id = &header[STORE_ID_AT as usize..STORE_ID_AT as usize + STORE_ID_LEN];
        let id_end = id.iter().position(|b| *b == 0).unwrap_or(STORE_ID_LEN);
        if &header[..8] != MAGIC || &id[..id_end] != store_id.as_bytes() {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!("{}: lock file belongs to another store", path.display()),
            ));
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = rustix::fs::open(
            parent,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| StateError::io(StateErrorKind::Unavailable, parent, e))?;
        let name = std::ffi::CString::new(
            path.file_name()
                .map(|n| n.as_encoded_bytes().to_vec())
                .unwrap_or_default(),
        )
        .map_err(|e| StateError::io(StateErrorKind::Unavailable, path, e))?;
        Ok(Arc::new(SlotFile {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            pool: Mutex::new(vec![file]),
            dir,
            name,
            path_checked_ms: std::sync::atomic::AtomicU64::new(0),
            epoch: Instant::now(),
        }))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The per-call check: the lock file's name in the (held-open) state directory still names
    /// the file first opened, at its full length (not deleted, replaced or truncated). The whole
    /// path is looked up again at most every [`PATH_CHECK_EVERY`] (a replaced state directory)
    /// and on every escalation ([`verify`](Self::verify)).
    pub fn verify_held(&self) -> Result<(), StateError> {
        match rustix::fs::statat(
            &self.dir,
            self.name.as_c_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(st)
                if st.st_dev == self.dev
                    && st.st_ino == self.ino
                    && st.st_size as u64 >= FILE_LEN => {}
            Ok(_) => {
                return Err(StateError::new(
                    StateErrorKind::Tampered,
                    format!(
                        "{}: lock file was replaced or truncated",
                        self.path.display()
                    ),
                ));
            }
            Err(e) => return Err(StateError::io(StateErrorKind::Tampered, &self.path, e)),
        }
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = self
            .path_checked_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        if now.saturating_sub(last) >= PATH_CHECK_EVERY.as_millis() as u64 {
            self.verify()?;
            self.path_checked_ms
                .store(now.max(1), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Fails unless the path still names the file first opened (not deleted, not replaced).
    pub fn verify(&self) -> Result<(), StateError> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino && m.len() >= FILE_LEN => Ok(()),
            Ok(_) => Err(StateError::new(
                StateErrorKind::Tampered,
                format!(
                    "{}: lock file was replaced or truncated",
                    self.path.display()
                ),
            )),
            Err(e) => Err(StateError::io(StateErrorKind::Tampered, &self.path, e)),
        }
    }

    /// Whether any call of any session waits for its lock exclusively (one system call for every
    /// bucket's intent byte; the kept passes' sweeper asks per pass only when this says yes).
    pub fn any_escalation_waiting(&self) -> Result<bool, StateError> {
        let file = self.take()?;
        // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = INTENT_AT as libc::off_t;
        fl.l_len = SLOTS as libc::off_t;
        let r = fcntl(&file, FcntlArg::F_OFD_GETLK(&mut fl))
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &self.path, e));
        self.give_back(file);
        r?;
        Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
    }

    /// Locks `slot` (shared or exclusive), waiting up to `timeout`.
    pub async fn lock(
        self: &Arc<Self>,
        slot: u64,
        mode: PassMode,
        timeout: Duration,
    ) -> Result<SlotHold, StateError> {
        let file = self.take()?;
        let offset = SLOTS_AT + (slot % SLOTS) * 8;
        let kind = match mode {
            PassMode::Shared => libc::F_RDLCK,
            PassMode::Exclusive => libc::F_WRLCK,
        };
        let intent = INTENT_AT + (slot % SLOTS);
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(100);
        let mut intent_held = false;
        loop {
            match set_lock(&file, kind, offset, 8) {
                Ok(()) => break,
                Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {}
                Err(e) => return Err(StateError::io(StateErrorKind::Unavailable, &self.path, e)),
            }
            // Waiting exclusively: say so (another waiter may already be saying it).
            if mode == PassMode::Exclusive && !intent_held {
                intent_held = set_lock(&file, libc::F_WRLCK, intent, 1).is_ok();
            }
            if Instant::now() >= deadline {
                if intent_held && set_lock(&file, libc::F_UNLCK, intent, 1).is_err() {
                    return Err(StateError::new(
                        StateErrorKind::Busy,
                        format!("session lock not granted within {timeout:?}"),
                    ));
                }
                self.give_back(file);
                return Err(StateError::new(
                    StateErrorKind::Busy,
                    format!("session lock not granted within {timeout:?}"),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        if intent_held && let Err(e) = set_lock(&file, libc::F_UNLCK, intent, 1) {
            // Dropping the descriptor releases both locks; the caller retries.
            return Err(StateError::io(StateErrorKind::Unavailable, &self.path, e));
        }
        Ok(SlotHold {
            file: Some(file),
            offset,
            owner: self.clone(),
        })
    }

    fn take(&self) -> Result<File, StateError> {
        if let Some(f) = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(f);
        }
        // A new open file description, checked to be the file first opened.
        let file = open_raw(&self.path)?;
        let meta = file
            .metadata()
            .map_err(|e| StateError::io(StateErrorKind::Unavailable, &self.path, e))?;
        if meta.dev() != self.dev || meta.ino() != self.ino {
            return Err(StateError::new(
                StateErrorKind::Tampered,
                format!("{}: lock file was replaced", self.path.display()),
            ));
        }
        Ok(file)
    }

    fn give_back(&self, file: File) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_MAX {
            pool.push(file);
        }
    }
}

fn open_raw(path: &Path) -> Result<File, StateError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            let kind = if e.kind() == std::io::ErrorKind::NotFound {
                StateErrorKind::Missing
            } else {
                StateErrorKind::Unavailable
            };
            StateError::io(kind, path, e)
        })
}

fn read_u64(file: &File, at: u64, path: &Path) -> Result<u64, StateError> {
    let mut buf = [0u8; 8];
    match file.read_at(&mut buf, at) {
        Ok(8) => Ok(u64::from_le_bytes(buf)),
        Ok(n) => Err(StateError::new(
            StateErrorKind::Tampered,
            format!(
                "{}: lock file truncated (read {n} of 8 bytes at {at})",
                path.display()
            ),
        )),
        Err(e) => Err(StateError::io(StateErrorKind::Unavailable, path, e)),
    }
}

/// One non-blocking OFD lock operation on `[start, start + len)`.
fn set_lock(file: &File, kind: libc::c_int, start: u64, len: u64) -> nix::Result<()> {
    // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start as libc::off_t;
    fl.l_len = len as libc::off_t;
    fl.l_pid = 0; // required for OFD locks
    fcntl(file, FcntlArg::F_OFD_SETLK(&fl)).map(|_| ())
}

/// A lock on a small range held only for a few system calls; waits by polling up to `timeout`.
fn lock_wait(
    file: &File,
    kind: libc::c_int,
    start: u64,
    len: u64,
    timeout: Duration,
    path: &Path,
) -> Result<(), StateError> {
    let deadline = Instant::now() + timeout;
    loop {
        match set_lock(file, kind, start, len) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {}
            Err(e) => return Err(StateError::io(StateErrorKind::Unavailable, path, e)),
        }
        if Instant::now() >= deadline {
            return Err(StateError::new(
                StateErrorKind::Busy,
                format!(
                    "{}: header lock not granted within {timeout:?}",
                    path.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instances sharing a volume create the lock file at once, and may share a process id
    /// (pid 1 of their own containers); threads of one process share it too. Every creator must
    /// succeed and leave one valid file (a shared temporary name once made one fail with ENOENT).
    #[test]
    fn creators_racing_with_one_process_id_all_succeed() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sessions-local.lock");
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        SlotFile::create(&path, "store-1", 0)
                    })
                })
                .collect();
            for h in handles {
                h.join()
                    .unwrap()
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
            SlotFile::open(&path, "store-1").unwrap();
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert_eq!(left.len(), 1, "no temporary file is left behind");
        }
    }
}
