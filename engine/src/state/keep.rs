//! Kept passes: a process keeps a session's shared lock after the call that took it ends, so
//! later calls of that session in the process *join* it and take no lock and read nothing.
//!
//! # The two rules (enforced here, and only here)
//!
//! 1. **A call joins only a kept pass whose lock is held.** An entry leaves the map (and is
//!    marked draining) before its lock can go, and a join checks both under the entry's mutex; a
//!    hold whose connection is gone ([`Hold::is_live`]) is never joined.
//! 2. **A kept lock goes only when no call joined to it runs.** Draining stops new joins; the
//!    lock is released by whichever happens last: the drain, or the last joined call leaving.
//!
//! While the lock is held no process can escalate the session, so the level read when it was
//! taken is the committed level for every call that joins it: the protocol's invariant (see
//! [`crate::state`]) holds with one lock and one read per kept pass instead of per call.
//! `tests/unit/state/model.rs` explores kept passes with drains at any moment; its mutants
//! `ReleaseKeptWhileJoined` and `JoinReleasedKeep` break rule 2 and rule 1.
//!
//! # When a kept pass drains
//!
//! - an escalation of its session waits anywhere (checked every [`KeepSettings::check`]): the
//!   wait an escalation adds is at most that, plus the calls joined at that moment;
//! - its own process wants to escalate the session ([`Keeper::escalating`]), and no new pass of
//!   that session is kept until the exclusive lock is granted or refused;
//! - no call joined it for [`KeepSettings::idle`];
//! - it is older than [`KeepSettings::max_age`]: the next call reads the store again, so the
//!   checks done on a read (a rolled-back database) run at least that often for a busy session.
//!
//! Per-call checks that need no read still run on every join (the lock file's identity).

use super::{Hold, Pass, PassMode};
use crate::identity::Identity;
use crate::policy::Sensitivity;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// How passes are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepSettings {
    /// Drain a kept pass no call joined for this long; zero keeps nothing.
    pub idle: Duration,
    /// How often a process looks for escalations waiting on its kept passes.
    pub check: Duration,
    /// Drain a kept pass this old (the next call reads the store again).
    pub max_age: Duration,
    /// Most passes one process keeps at once (each holds a lock; SQLite: a descriptor).
    pub max: usize,
}

impl Default for KeepSettings {
    fn default() -> Self {
        KeepSettings {
            idle: Duration::from_millis(50),
            check: Duration::from_millis(5),
            max_age: Duration::from_secs(1),
            max: 256,
        }
    }
}

impl KeepSettings {
    /// Keeps nothing: every call takes and releases its own lock.
    pub fn off() -> KeepSettings {
        KeepSettings {
            idle: Duration::ZERO,
            ..KeepSettings::default()
        }
    }

    fn enabled(&self) -> bool {
        !self.idle.is_zero() && self.max > 0
    }
}

/// A process's kept passes of one store.
pub(crate) struct Keeper {
    inner: Arc<Inner>,
}

struct Inner {
    map: Mutex<HashMap<Identity, Entry>>,
    settings: KeepSettings,
    /// Whether a sweeper runs (it stops when nothing is kept).
    sweeping: AtomicBool,
}

enum Entry {
    Kept(Arc<Kept>),
    /// Calls of this process wait for the session's lock exclusively: keep nothing new.
    Escalating(u32),
}

/// One kept pass.
pub(crate) struct Kept {
    level: Sensitivity,
    born: Instant,
    state: Mutex<KeptState>,
}

struct KeptState {
    hold: Option<Hold>,
    joined: usize,
    draining: bool,
    last_join: Instant,
}

/// A call's place in a kept pass; leaving it (drop) may release the kept lock (rule 2).
pub(crate) struct Joined {
    kept: Arc<Kept>,
}

impl Drop for Joined {
    fn drop(&mut self) {
        let released = {
            let mut st = lock(&self.kept.state);
            st.joined -= 1;
            if st.draining && st.joined == 0 {
                st.hold.take()
            } else {
                None
            }
        };
        drop(released);
    }
}

impl Joined {
    /// Runs `f` on the kept hold (held while any call is joined).
    pub(crate) fn with_hold<T>(&self, f: impl FnOnce(&Hold) -> T) -> T {
        let st = lock(&self.kept.state);
        f(st.hold.as_ref().expect("held while a call is joined"))
    }
}

/// Held while a call of this process waits for a session's lock exclusively.
pub(crate) struct Escalating {
    inner: Arc<Inner>,
    id: Identity,
}

impl Drop for Escalating {
    fn drop(&mut self) {
        let mut map = lock(&self.inner.map);
        if let Some(Entry::Escalating(n)) = map.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.id);
            }
        }
    }
}

impl Keeper {
    pub(crate) fn new(settings: KeepSettings) -> Keeper {
        Keeper {
            inner: Arc::new(Inner {
                map: Mutex::default(),
                settings,
                sweeping: AtomicBool::new(false),
            }),
        }
    }

    /// Joins the session's kept pass, if the process keeps one that may be joined (rule 1).
    pub(crate) fn join(&self, id: &Identity) -> Option<Pass> {
        if !self.inner.settings.enabled() {
            return None;
        }
        let kept = match lock(&self.inner.map).get(id) {
            Some(Entry::Kept(k)) => k.clone(),
            _ => return None,
        };
        {
            let mut st = lock(&kept.state);
            if st.draining || !st.hold.as_ref().is_some_and(Hold::is_live) {
                return None;
            }
            st.joined += 1;
            st.last_join = Instant::now();
        }
        Some(Pass::new(
            id.clone(),
            kept.level,
            PassMode::Shared,
            Hold::Kept(Joined { kept }),
        ))
    }

    /// Whether a new shared pass of the session may be kept (none is, no call of this process
    /// waits to escalate it, and the limit is not reached).
    pub(crate) fn may_keep(&self, id: &Identity) -> bool {
        if !self.inner.settings.enabled() {
            return false;
        }
        let map = lock(&self.inner.map);
        !map.contains_key(id) && map.len() < self.inner.settings.max
    }

    /// Keeps the shared `pass` just taken (its level read under its lock) and returns the
    /// caller's pass joined to it, and whether no sweeper runs (the caller then starts one).
    pub(crate) fn keep(&self, pass: Pass) -> (Pass, bool) {
        debug_assert_eq!(pass.mode(), PassMode::Shared);
        let (id, level, hold) = pass.into_parts();
        let now = Instant::now();
        let kept = Arc::new(Kept {
            level,
            born: now,
            state: Mutex::new(KeptState {
                hold: Some(hold),
                joined: 1,
                draining: false,
                last_join: now,
            }),
        });
        {
            let mut map = lock(&self.inner.map);
            if map.contains_key(&id) {
                // Another call kept one meanwhile: this one stays the call's own pass, released
                // when it leaves.
                drop(map);
                lock(&kept.state).draining = true;
            } else {
                map.insert(id.clone(), Entry::Kept(kept.clone()));
            }
        }
        let start_sweeper = !self.inner.sweeping.swap(true, Ordering::AcqRel);
        (
            Pass::new(id, level, PassMode::Shared, Hold::Kept(Joined { kept })),
            start_sweeper,
        )
    }

    /// Drains the session's kept pass (its lock goes when the last joined call leaves) and
    /// keeps none until the returned guard is dropped: held while waiting for the exclusive lock.
    pub(crate) fn escalating(&self, id: &Identity) -> Escalating {
        let drained = {
            let mut map = lock(&self.inner.map);
            match map.remove(id) {
                Some(Entry::Kept(k)) => {
                    map.insert(id.clone(), Entry::Escalating(1));
                    Some(k)
                }
                Some(Entry::Escalating(n)) => {
                    map.insert(id.clone(), Entry::Escalating(n + 1));
                    None
                }
                None => {
                    map.insert(id.clone(), Entry::Escalating(1));
                    None
                }
            }
        };
        if let Some(k) = drained {
            drain(&k);
        }
        Escalating {
            inner: self.inner.clone(),
            id: id.clone(),
        }
    }

    /// Drains every kept pass (when no sweeper can run); the next kept pass tries to start one.
    pub(crate) fn drain_all(&self) {
        self.inner.sweeping.store(false, Ordering::Release);
        let all: Vec<Arc<Kept>> = lock(&self.inner.map)
            .extract_if(|_, e| matches!(e, Entry::Kept(_)))
            .filter_map(|(_, e)| match e {
                Entry::Kept(k) => Some(k),
                Entry::Escalating(_) => None,
            })
            .collect();
        for k in all {
            drain(&k);
        }
    }

    /// A handle for the sweeper: it ends when the keeper is dropped.
    pub(crate) fn weak(&self) -> WeakKeeper {
        WeakKeeper(Arc::downgrade(&self.inner))
    }
}

/// The sweeper's handle on a keeper.
pub(crate) struct WeakKeeper(Weak<Inner>);

impl WeakKeeper {
    /// The check interval, or `None` when the keeper is gone.
    pub(crate) fn check(&self) -> Option<Duration> {
        self.0.upgrade().map(|i| i.settings.check)
    }

    /// Drains every kept pass that is idle, too old, dead, or that `waiting` says an escalation
    /// waits for. Returns false when the sweeper should stop (nothing kept, or the keeper gone);
    /// it then clears the flag so that the next kept pass starts a new one.
    pub(crate) fn sweep(&self, waiting: impl Fn(&Hold) -> bool) -> bool {
        let Some(inner) = self.0.upgrade() else {
            return false;
        };
        let now = Instant::now();
        let s = inner.settings;
        let mut drained = Vec::new();
        {
            let mut map = lock(&inner.map);
            map.retain(|_, e| {
                let Entry::Kept(k) = e else { return true };
                let st = lock(&k.state);
                let stale = now.duration_since(st.last_join) >= s.idle
                    || now.duration_since(k.born) >= s.max_age
                    || st.hold.as_ref().is_none_or(|h| !h.is_live() || waiting(h));
                drop(st);
                if stale {
                    drained.push(k.clone());
                }
                !stale
            });
            if !map.values().any(|e| matches!(e, Entry::Kept(_))) {
                inner.sweeping.store(false, Ordering::Release);
                drop(map);
                drained.iter().for_each(|k| drain(k));
                return false;
            }
        }
        drained.iter().for_each(|k| drain(k));
        true
    }

    /// The holds of the kept passes (for a backend that asks about them all at once).
    pub(crate) fn holds<T>(&self, f: impl Fn(&Hold) -> Option<T>) -> Vec<T> {
        let Some(inner) = self.0.upgrade() else {
            return Vec::new();
        };
        let map = lock(&inner.map);
        map.values()
            .filter_map(|e| match e {
                Entry::Kept(k) => lock(&k.state).hold.as_ref().and_then(&f),
                Entry::Escalating(_) => None,
            })
            .collect()
    }
}

/// Stops new joins; releases the lock now if no call is joined (rule 2).
fn drain(k: &Kept) {
    let released = {
        let mut st = lock(&k.state);
        st.draining = true;
        if st.joined == 0 { st.hold.take() } else { None }
    };
    drop(released);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here only moves counters and options: a panic leaves them usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
