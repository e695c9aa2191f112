//! The JSON-lines audit file: appended by one writer per process (`O_APPEND`, so lines of several
//! processes never interleave), synced on demand, rotated by size.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An open audit file.
pub struct AuditFile {
    path: PathBuf,
    file: File,
    ino: u64,
    rotate_bytes: u64,
    keep: usize,
    /// A failed append may have left part of a line: the next one starts on a fresh line.
    torn: bool,
}

impl AuditFile {
    /// Opens (or creates: directory 0700, file 0600) the log at `path`; refuses a symlink.
    pub fn open(path: &Path, rotate_bytes: u64, keep: usize) -> std::io::Result<AuditFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = open_append(path)?;
        let ino = file.metadata()?.ino();
        Ok(AuditFile {
            path: path.to_path_buf(),
            file,
            ino,
            rotate_bytes,
            keep: keep.max(1),
            torn: false,
        })
    }

    /// The current file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `bytes` (whole lines) in one write; syncs the data when `sync`.
    pub fn append(&mut self, bytes: &[u8], sync: bool) -> std::io::Result<()> {
        self.follow_rotation()?;
        if self.torn {
            self.file.write_all(b"\n")?;
            self.torn = false;
        }
        if let Err(e) = self.file.write_all(bytes) {
            self.torn = true;
            return Err(e);
        }
        if sync {
            self.file.sync_data()?;
        }
        if self.file.metadata()?.len() >= self.rotate_bytes {
            self.rotate()?;
        }
        Ok(())
    }

    /// Syncs what was written.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// Another process rotated the file: append to the new one from now on.
    fn follow_rotation(&mut self) -> std::io::Result<()> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.ino() == self.ino => Ok(()),
            Ok(_) | Err(_) => self.reopen(),
        }
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        let _ = self.file.sync_data();
        self.file = open_append(&self.path)?;
        self.ino = self.file.metadata()?.ino();
        Ok(())
    }

    /// Renames `log` → `log.1` → … → `log.<keep>` (the oldest is dropped) under an exclusive
    /// `flock`, so only one process rotates; the others follow on their next append.
    fn rotate(&mut self) -> std::io::Result<()> {
        use rustix::fs::{FlockOperation, flock};
        if flock(&self.file, FlockOperation::NonBlockingLockExclusive).is_err() {
            return Ok(());
        }
        let still_ours = std::fs::symlink_metadata(&self.path)
            .map(|m| m.ino() == self.ino && m.len() >= self.rotate_bytes)
            .unwrap_or(false);
        if still_ours {
            self.file.sync_data()?;
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1));
            }
            std::fs::rename(&self.path, numbered(&self.path, 1))?;
        }
        let _ = flock(&self.file, FlockOperation::Unlock);
        self.reopen()
    }
}

fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{n}"));
    PathBuf::from(p)
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}
