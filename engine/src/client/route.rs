//! The client's one-way routing state: the session level it has seen and the least isolated
//! mode it may still use. Both are atomics that only ever rise, so concurrent calls can never
//! route a later decision to a less isolated instance than an earlier one.

use crate::policy::{NetworkMode, Sensitivity};
use std::sync::atomic::{AtomicU8, Ordering};

/// The routing state of the agent session behind `token`, shared by every isolating client of
/// this process that uses that token: when one server's reply shows the session rising, every
/// server of the session moves, one way, before its next call (the session's level is one
/// across the servers of a trust domain). Keyed by a hash of the token, held weakly: the state
/// lives as long as a client of the session does.
pub fn for_session(token: &str) -> std::sync::Arc<Ratchet> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    static SESSIONS: OnceLock<Mutex<HashMap<u64, Weak<Ratchet>>>> = OnceLock::new();
    let key = token.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut map = SESSIONS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(r) = map.get(&key).and_then(Weak::upgrade) {
        return r;
    }
    map.retain(|_, w| w.strong_count() > 0);
    let r = Arc::new(Ratchet::new());
    map.insert(key, Arc::downgrade(&r));
    r
}

/// The session level as the client knows it and the mode floor it routes at; never lowered.
#[derive(Debug, Default)]
pub struct Ratchet {
    level: AtomicU8,
    mode: AtomicU8,
}

impl Ratchet {
    /// A fresh ratchet: `public`, full network.
    pub fn new() -> Ratchet {
        Ratchet::default()
    }

    /// The highest session level seen.
    pub fn level(&self) -> Sensitivity {
        Sensitivity::from_index(self.level.load(Ordering::SeqCst)).unwrap_or(Sensitivity::Secret)
    }

    /// The least isolated mode the client may still route to.
    pub fn mode(&self) -> NetworkMode {
        NetworkMode::from_index(self.mode.load(Ordering::SeqCst)).unwrap_or(NetworkMode::None)
    }

    /// Raises the known level (and the mode floor with it); lower values are ignored.
    pub fn raise_level(&self, level: Sensitivity) {
        self.level.fetch_max(level.index(), Ordering::SeqCst);
        self.raise_mode(level.required_mode());
    }

    /// Raises the mode floor; lower values are ignored.
    pub fn raise_mode(&self, mode: NetworkMode) {
        self.mode.fetch_max(mode.index(), Ordering::SeqCst);
    }

    /// Picks the least isolated of `available` (sorted, least isolated first) that may serve
    /// `max(known level, declared)` and is not below the floor, and raises the floor to it.
    /// `Err` carries the level no available instance may serve.
    pub fn route(
        &self,
        declared: Sensitivity,
        available: &[NetworkMode],
    ) -> Result<NetworkMode, Sensitivity> {
        loop {
            let needed = self.level().max(declared);
            let want = self.mode().max(needed.required_mode());
            let Some(&pick) = available.iter().find(|&&m| m >= want) else {
                return Err(needed.max(want.least_level()));
            };
            // If another call raised the floor past `pick` meanwhile, decide again.
            let before = self.mode.fetch_max(pick.index(), Ordering::SeqCst);
            if before <= pick.index() {
                return Ok(pick);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const ALL: [NetworkMode; 3] = NetworkMode::ALL;

    #[test]
    fn routes_by_level_and_declared_sensitivity_one_way() {
        let r = Ratchet::new();
        assert_eq!(r.route(Sensitivity::Internal, &ALL), Ok(NetworkMode::Full));
        assert_eq!(
            r.route(Sensitivity::Confidential, &ALL),
            Ok(NetworkMode::Proxied)
        );
        // The floor stays even though the known level never rose (the call may have escalated).
        assert_eq!(r.level(), Sensitivity::Public);
        assert_eq!(r.route(Sensitivity::Public, &ALL), Ok(NetworkMode::Proxied));
        r.raise_level(Sensitivity::Secret);
        assert_eq!(r.route(Sensitivity::Public, &ALL), Ok(NetworkMode::None));
        r.raise_level(Sensitivity::Internal);
        assert_eq!(r.level(), Sensitivity::Secret, "never lowered");
        assert_eq!(r.mode(), NetworkMode::None);
    }

    #[test]
    fn skips_missing_instances_and_refuses_when_none_fits() {
        let r = Ratchet::new();
        let two = [NetworkMode::Full, NetworkMode::None];
        assert_eq!(
            r.route(Sensitivity::Confidential, &two),
            Ok(NetworkMode::None)
        );
        assert_eq!(r.mode(), NetworkMode::None);
        let r = Ratchet::new();
        let normal_and_proxied = [NetworkMode::Full, NetworkMode::Proxied];
        assert_eq!(
            r.route(Sensitivity::Secret, &normal_and_proxied),
            Err(Sensitivity::Secret)
        );
        assert_eq!(
            r.mode(),
            NetworkMode::Full,
            "a refused route raises nothing"
        );
    }

    #[test]
    fn concurrent_raises_and_routes_never_decrease() {
        let r = Arc::new(Ratchet::new());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let mut last = NetworkMode::Full;
                    for n in 0..2000 {
                        if i == 0 && n == 500 {
                            r.raise_level(Sensitivity::Confidential);
                        }
                        let m = r.route(Sensitivity::Public, &ALL).unwrap();
                        assert!(m >= last, "thread {i} went back from {last} to {m}");
                        last = m;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.route(Sensitivity::Public, &ALL), Ok(NetworkMode::Proxied));
    }
}
