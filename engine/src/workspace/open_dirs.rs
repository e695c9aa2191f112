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

/// Users, then their sessions: a lookup by `&str` allocates nothing.
#[derive(Default)]
struct Map {
    entries: HashMap<Box<str>, HashMap<Box<str>, Entry>>,
    len: usize,
    clock: u64,
}

impl Map {
    fn remove(&mut self, user: &str, session: &str) {
        if let Some(sessions) = self.entries.get_mut(user)
            && sessions.remove(session).is_some()
        {
            self.len -= 1;
            if sessions.is_empty() {
                self.entries.remove(user);
            }
        }
    }
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
        let mut guard = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let map = &mut *guard;
        map.remove(user, session);
        if map.len >= self.max {
            let oldest = map
                .entries
                .iter()
                .flat_map(|(u, ss)| ss.iter().map(move |(s, e)| (e.used, u, s)))
                .min_by_key(|(used, _, _)| *used)
                .map(|(_, u, s)| (u.clone(), s.clone()));
            if let Some((u, s)) = oldest {
                map.remove(&u, &s);
            }
        }
        map.clock += 1;
        let used = map.clock;
        map.entries.entry(user.into()).or_default().insert(
            session.into(),
            Entry {
                dir: dir.clone(),
                opened: Instant::now(),
                used,
            },
        );
        map.len += 1;
        Ok(dir)
    }

    /// A remembered handle that may still be served (see the module doc), else `None` (and a
    /// stale entry is dropped).
    fn hit(&self, user: &str, session: &str) -> Option<Arc<Dir>> {
        let mut guard = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let map = &mut *guard;
        map.clock += 1;
        let clock = map.clock;
        let entry = map.entries.get_mut(user)?.get_mut(session)?;
        if entry.opened.elapsed() < REVALIDATE && live(&entry.dir) {
            entry.used = clock;
            return Some(entry.dir.clone());
        }
        map.remove(user, session);
        None
    }

    /// Directories held open now.
    pub(super) fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len
    }
}

/// Whether `dir` is still linked into the file system (a removed directory has no links left).
fn live(dir: &Dir) -> bool {
    rustix::fs::fstat(dir).is_ok_and(|st| st.st_nlink > 0)
}
