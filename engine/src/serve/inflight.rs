//! Tool calls in flight, by caller and JSON-RPC request id, so a `notifications/cancelled` can
//! reach its call where rmcp cannot route it: calls that [`super::direct`] answers never reach
//! rmcp, and in stateless serving rmcp drops notifications; the direct layer reads every small
//! `POST` for them first. A caller can only cancel its own calls (the key includes the verified
//! identity). Entries live exactly as long as their call (a guard removes them), so the map is
//! bounded by the calls running at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::identity::Identity;

type Key = (Identity, String);

/// The registry of running calls (each key shared with its guard, not copied).
#[derive(Default)]
pub struct Inflight {
    calls: Mutex<HashMap<Arc<Key>, (u64, CancellationToken)>>,
    next: AtomicU64,
}

impl Inflight {
    /// Registers a call of `identity` under `request_id` (its JSON text); the guard's token is
    /// cancelled by a matching notification, and dropping the guard unregisters it.
    pub fn register(self: &Arc<Self>, identity: &Identity, request_id: String) -> Registered {
        let token = CancellationToken::new();
        let key = Arc::new((identity.clone(), request_id));
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(key.clone(), (n, token.clone()));
        Registered {
            inflight: self.clone(),
            key,
            n,
            token,
        }
    }

    /// Cancels `identity`'s call `request_id`, if it is running.
    pub fn cancel(&self, identity: &Identity, request_id: &str) -> bool {
        let key = (identity.clone(), request_id.to_owned());
        match self.lock().get(&key) {
            Some((_, t)) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Calls running now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no call is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<Key>, (u64, CancellationToken)>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A registered call; unregisters on drop.
pub struct Registered {
    inflight: Arc<Inflight>,
    key: Arc<Key>,
    n: u64,
    token: CancellationToken,
}

impl Registered {
    /// Cancelled when the caller cancels this call.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut calls = self.inflight.lock();
        // A later call may reuse the id; remove only this call's entry.
        if calls.get(&*self.key).is_some_and(|(n, _)| *n == self.n) {
            calls.remove(&*self.key);
        }
    }
}

/// The JSON text of a request id as rmcp and clients write it (`5`, `"abc"`).
pub fn request_key(id: &impl serde::Serialize) -> String {
    serde_json::to_string(id).unwrap_or_default()
}
