//! Session directories kept open between calls, so a call does not walk `<root>/<user>/<session>`
//! again (two `openat2` and two `close` per call before this cache).
//!
//! The invariant, enforced in [`OpenDirs::get`]: **a handle is served only while it still names a
//! live directory that was at `<root>/<user>/<session>` less than [`REVALIDATE`] ago.** Each hit
//! checks the open directory's link count (one `fstat`, no path walk): a directory removed under
//! us (by an operator's clean-up) has none left, and the next call opens — and makes — the path
//! again instead of failing in a dead directory. A directory renamed away is noticed when its
//! entry is older than [`REVALIDATE`], since the path is then opened again. The map holds at most
//! `workspace.open_dirs` handles (one descriptor each); the least recently used goes first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cap_std::fs::Dir;

/// How long an open handle stands for its path before the path is opened again.
pub const REVALIDATE: Duration = Duration::from_secs(1);

/// Default number of session directories held open (`workspace.open_dirs`).
pub const DEFAULT_OPEN_DIRS: usize = 256;

struct Entry {
    dir: Arc<Dir>,
    opened: Instant,
    used: u64,
}

/// A bounded map from `(user, session)` to that session's open directory.
pub(super) struct OpenDirs {
    max: usize,
    map: Mutex<Map>,
}

#[derive(Default)]
struct Map {
    entries: HashMap<(Box<str>, Box<str>), Entry>,
    clock: u64,
}

impl std::fmt::Debug for OpenDirs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenDirs")
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl OpenDirs {
    /// Holds at most `max` directories; 0 keeps none (every call opens the path).
    pub(super) fn new(max: usize) -> OpenDirs {
        OpenDirs {
            max,
            map: Mutex::new(Map::default()),
        }
    }

    /// The open directory of `(user, session)`, or `open()`'s fresh one (then remembered).
    pub(super) fn get<E>(
        &self,
        user: &str,
        session: &str,
        open: impl FnOnce() -> Result<Dir, E>,
    ) -> Result<Arc<Dir>, E> {
        if self.max == 0 {
            return open().map(Arc::new);
        }
        if let Some(dir) = self.hit(user, session) {
            return Ok(dir);
        }
        let dir = Arc::new(open()?);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.entries.len() >= self.max {
            let oldest = map
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.entries.remove(&k);
            }
        }
        map.clock += 1;
        let used = map.clock;
        map.entries.insert(
            (user.into(), session.into()),
            Entry {
                dir: dir.clone(),
                opened: Instant::now(),
                used,
            },
        );
        Ok(dir)
    }

    /// A remembered handle that may still be served (see the module doc), else `None` (and a
    /// stale entry is dropped).
    fn hit(&self, user: &str, session: &str) -> Option<Arc<Dir>> {
        let mut guard = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let map = &mut *guard;
        map.clock += 1;
        let key = (Box::<str>::from(user), Box::<str>::from(session));
        let entry = map.entries.get_mut(&key)?;
        if entry.opened.elapsed() < REVALIDATE && live(&entry.dir) {
            entry.used = map.clock;
            return Some(entry.dir.clone());
        }
        map.entries.remove(&key);
        None
    }

    /// Directories held open now.
    pub(super) fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }
}

/// Whether `dir` is still linked into the file system (a removed directory has no links left).
fn live(dir: &Dir) -> bool {
    rustix::fs::fstat(dir).is_ok_and(|st| st.st_nlink > 0)
}
