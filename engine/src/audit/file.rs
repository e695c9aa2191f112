//! The JSON-lines audit file: appended by one writer per process (`O_APPEND`, so lines of several
//! processes never interleave), synced on demand, rotated by size. Before rotation drops the
//! oldest kept file, the last record of each writer in it (its floor) is handed to the caller,
//! which commits it in a checkpoint: a dropped file is evidence, not a hole.

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

    /// When the file has reached its size: renames `log` → `log.1` → … → `log.<keep>` under an
    /// exclusive `flock`, so only one process rotates (the others follow on their next append).
    /// When that drops a file (`log.<keep>` exists), `before_drop` gets the floor of every writer
    /// in it first, after this file is synced; if it fails, nothing is renamed.
    pub fn rotate(&mut self, before_drop: &mut Floors<'_>) -> Result<(), String> {
        use rustix::fs::{FlockOperation, flock};
        let path = self.path.clone();
        let at = |e: std::io::Error| format!("{}: {e}", path.display());
        if self.file.metadata().map_err(at)?.len() < self.rotate_bytes {
            return Ok(());
        }
        if flock(&self.file, FlockOperation::NonBlockingLockExclusive).is_err() {
            return Ok(());
        }
        let result = self.rotate_locked(before_drop);
        let _ = flock(&self.file, FlockOperation::Unlock);
        result?;
        self.reopen().map_err(at)
    }

    fn rotate_locked(&mut self, before_drop: &mut Floors<'_>) -> Result<(), String> {
        let at = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        let still_ours = std::fs::symlink_metadata(&self.path)
            .map(|m| m.ino() == self.ino && m.len() >= self.rotate_bytes)
            .unwrap_or(false);
        if !still_ours {
            return Ok(());
        }
        self.file.sync_data().map_err(|e| at(&self.path, e))?;
        let dropped = numbered(&self.path, self.keep);
        if dropped.exists() {
            let floors = floors(&dropped).map_err(|e| at(&dropped, e))?;
            before_drop(floors)?;
            crate::failpoint!("audit.before_drop");
        }
        for n in (1..self.keep).rev() {
            let _ = std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1));
        }
        std::fs::rename(&self.path, numbered(&self.path, 1)).map_err(|e| at(&self.path, e))
    }

    /// The last record of `writer` in the kept files that continues its chain from record
    /// `seq` (hash `hash`): what a writer that stopped without closing left after its last
    /// checkpoint. Reads the files newest first until one holds its record `seq + 1`.
    pub fn tail(
        &self,
        writer: &str,
        seq: i64,
        hash: &str,
    ) -> std::io::Result<Option<(u64, String)>> {
        let mut files = vec![self.path.clone()];
        files.extend((1..=self.keep).map(|n| numbered(&self.path, n)));
        let mut found: Vec<Vec<(u64, String, String)>> = Vec::new();
        for f in files {
            let mut mine = Vec::new();
            match for_each_line(&f, &mut |line, _, _| {
                if let Some(l) = super::chain::parse_link(line)
                    && l.writer == writer
                    && l.seq as i64 > seq
                {
                    let h = super::chain::hex(&super::chain::line_hash(line));
                    mine.push((l.seq, l.prev.to_owned(), h));
                }
            }) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
            let reached = mine.first().is_some_and(|m| m.0 as i64 <= seq + 1);
            found.push(mine);
            if reached {
                break;
            }
        }
        Ok(super::chain::last_continuing(
            seq,
            hash,
            found.into_iter().rev().flatten(),
        ))
    }
}

/// Receives the floors of a file about to be dropped (see [`AuditFile::rotate`]).
pub type Floors<'a> = dyn FnMut(Vec<(String, super::checkpoint::Floor)>) -> Result<(), String> + 'a;

/// The last record of each writer in the file at `path`.
fn floors(path: &Path) -> std::io::Result<Vec<(String, super::checkpoint::Floor)>> {
    let mut last: std::collections::BTreeMap<String, (u64, Vec<u8>)> = Default::default();
    for_each_line(path, &mut |line, _, _| {
        if let Some(l) = super::chain::parse_link(line) {
            last.insert(l.writer.to_owned(), (l.seq, line.to_vec()));
        }
    })?;
    Ok(last
        .into_iter()
        .map(|(w, (seq, line))| {
            let hash = super::chain::hex(&super::chain::line_hash(&line));
            (w, super::checkpoint::Floor { seq, hash })
        })
        .collect())
}

/// Calls `f(line, number, torn)` for every non-empty line of the file at `path` (without its
/// newline; `torn`: the last line, with no newline), reading it in blocks of 4 MiB and finding
/// line ends with `memchr` (a line is copied only when it spans two blocks).
pub fn for_each_line(path: &Path, f: &mut dyn FnMut(&[u8], usize, bool)) -> std::io::Result<()> {
    for_each_line_in(path, 4 << 20, f)
}

fn for_each_line_in(
    path: &Path,
    block: usize,
    f: &mut dyn FnMut(&[u8], usize, bool),
) -> std::io::Result<()> {
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; block];
    // The start of a line that continues in the next block.
    let mut carry: Vec<u8> = Vec::new();
    let mut number = 0;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut block = &buf[..n];
        if !carry.is_empty() {
            match memchr::memchr(b'\n', block) {
                Some(end) => {
                    carry.extend_from_slice(&block[..end]);
                    number += 1;
                    f(&carry, number, false);
                    carry.clear();
                    block = &block[end + 1..];
                }
                None => {
                    carry.extend_from_slice(block);
                    continue;
                }
            }
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', block) {
            number += 1;
            if end > start {
                f(&block[start..end], number, false);
            }
            start = end + 1;
        }
        carry.extend_from_slice(&block[start..]);
    }
    if !carry.is_empty() {
        number += 1;
        f(&carry, number, true);
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    #[test]
    fn lines_are_whole_across_blocks_and_a_torn_last_one_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "abc\n\ndefghijklmnop\nq\nrstuvw").unwrap();
        for block in [1, 2, 3, 5, 7, 64] {
            let mut seen = Vec::new();
            super::for_each_line_in(&path, block, &mut |l, n, torn| {
                seen.push((String::from_utf8(l.to_vec()).unwrap(), n, torn))
            })
            .unwrap();
            assert_eq!(
                seen,
                [
                    ("abc".into(), 1, false),
                    ("defghijklmnop".into(), 3, false),
                    ("q".into(), 4, false),
                    ("rstuvw".into(), 5, true)
                ],
                "block {block}"
            );
        }
    }
}
