//! Per-session ordering of `connect` calls and escalations within one process: an escalation
//! waits for in-flight `connect` calls of its session, and a `connect` call that starts after an
//! escalation sees the raised level.

use crate::identity::Identity;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::RwLock;

/// Locks keyed by session.
#[derive(Default)]
pub struct SessionGuards {
    locks: Mutex<HashMap<Identity, Arc<RwLock<()>>>>,
}

impl SessionGuards {
    /// The lock of one session (created on first use).
    pub fn of(&self, id: &Identity) -> Arc<RwLock<()>> {
        let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 10_000 {
            // Drop locks nobody holds, so the map stays bounded by active sessions.
            map.retain(|_, l| Arc::strong_count(l) > 1);
        }
        map.entry(id.clone()).or_default().clone()
    }
}
