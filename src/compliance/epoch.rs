//! A cross-process change counter for the ratchet, in a small memory-mapped file beside the
//! store. Every escalation bumps it after its commit, so a level read can come from memory while
//! the counter is unchanged: no lock, no system call on the hot path. The counter is read before
//! the database, so a cached level is never newer than the counter it is keyed by.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The mapped counter.
pub struct Epoch {
    map: memmap2::MmapMut,
}

impl Epoch {
    /// Maps `path` (created with 8 zero bytes, mode 0600, when missing).
    pub fn open(path: &Path) -> std::io::Result<Epoch> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        if file.metadata()?.len() < 8 {
            file.set_len(8)?;
        }
        // SAFETY: the file is ours (state directory, 0600) and only ever accessed through the
        // atomic below; other processes map it the same way.
        let map = unsafe { memmap2::MmapOptions::new().len(8).map_mut(&file)? };
        Ok(Epoch { map })
    }

    fn counter(&self) -> &AtomicU64 {
        // SAFETY: the mapping is page-aligned, 8 bytes long and lives as long as `self`;
        // AtomicU64 has the same layout as u64, and all access goes through atomics.
        unsafe { &*(self.map.as_ptr() as *const AtomicU64) }
    }

    /// The current value.
    pub fn current(&self) -> u64 {
        self.counter().load(Ordering::Acquire)
    }

    /// Announces a committed escalation to every process.
    pub fn bump(&self) {
        self.counter().fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_of_one_file_see_each_others_bumps() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.epoch");
        let (a, b) = (Epoch::open(&p).unwrap(), Epoch::open(&p).unwrap());
        let start = a.current();
        b.bump();
        b.bump();
        assert_eq!(a.current(), start + 2);
    }
}
