//! The store's chain of checkpoints: the signed evidence `bulkhead audit verify` checks the log
//! against. Every writer of a store (each process, of every server and replica) commits the next
//! checkpoint from the newest one, in one transaction; a checkpoint names the one before it (the
//! hash of its signed message), its number `n` (0, 1, 2, …), its time, and every writer whose
//! records the log holds: its server, its last record (`seq`, `hash`), whether it closed, and the
//! floor below which rotation dropped its records by policy.
//!
//! The invariant (checked by [`consistent`] between any two checkpoints): a checkpoint only moves
//! forward. `n` grows by one; a writer's `seq` never goes back and a record it names never
//! changes; a closed writer stays closed at the same record; a floor never goes back; a writer
//! leaves the set only when it closed and every record of it was dropped by rotation (retired).
//! So a checkpoint signed once stands for every record before it: cutting the log back to an
//! older checkpoint needs the newer ones deleted, which an anchor kept outside the store
//! (`bulkhead audit anchor`, `verify --anchor`) detects.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// One checkpoint, as signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Its place in the store's chain, from 0.
    pub n: u64,
    /// The hash of the checkpoint before it ([`genesis`] for the first).
    pub prev: String,
    /// When it was made (Unix seconds).
    pub at: i64,
    /// The writer that made it.
    pub by: String,
    /// Every writer whose records the log holds, by id.
    pub writers: BTreeMap<String, WriterHead>,
}

/// One writer, as a checkpoint names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterHead {
    /// The server whose log it writes.
    pub server: String,
    /// Its last record's `seq` (-1: none yet).
    pub seq: i64,
    /// Its last record's hash (hex), or its genesis hash.
    pub hash: String,
    /// No record of it may follow `seq`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
    /// Its records up to this one were dropped by rotation (`audit.keep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
    /// It stopped without closing, and another writer closed it at the last record the log held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<Seal>,
    /// When its own writer last moved it (Unix seconds): a writer alive refreshes it.
    pub at: i64,
}

/// A record below which a writer's records were dropped by rotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Floor {
    /// The last dropped record's `seq`.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

/// How a writer that stopped without closing was closed by another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    /// The writer that closed it.
    pub by: String,
    /// The last `seq` its own writer had signed.
    pub signed: i64,
}

/// A checkpoint with the bytes its signature and hash cover, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Its JSON, as signed.
    pub body: String,
    /// Ed25519 signature (hex) of [`message`]`(body)`, when a signing key is configured.
    pub sig: Option<String>,
}

impl Stored {
    /// Parses a stored row (`body` as written, `sig`).
    pub fn parse(body: String, sig: Option<String>) -> Result<Stored, String> {
        let checkpoint = serde_json::from_str(&body)
            .map_err(|e| format!("an audit checkpoint that is not one: {e}"))?;
        Ok(Stored {
            checkpoint,
            body,
            sig,
        })
    }

    /// Serialises and signs `checkpoint`.
    pub fn seal(checkpoint: Checkpoint, key: Option<&ed25519_dalek::SigningKey>) -> Stored {
        let body = serde_json::to_string(&checkpoint).expect("a checkpoint serialises");
        let sig = key.map(|k| {
            use ed25519_dalek::Signer as _;
            super::chain::hex(&k.sign(&message(&body)).to_bytes())
        });
        Stored {
            checkpoint,
            body,
            sig,
        }
    }

    /// Its hash: what the next checkpoint's `prev` and an anchor name.
    pub fn hash(&self) -> String {
        super::chain::hex(&Sha256::digest(message(&self.body)))
    }

    /// Whether it carries a valid signature by `key`.
    pub fn signed_by(&self, key: &ed25519_dalek::VerifyingKey) -> bool {
        self.sig
            .as_deref()
            .and_then(unhex)
            .and_then(|b| ed25519_dalek::Signature::from_slice(&b).ok())
            .is_some_and(|sig| key.verify_strict(&message(&self.body), &sig).is_ok())
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

/// The bytes a checkpoint's signature and hash cover.
pub fn message(body: &str) -> Vec<u8> {
    let mut m = b"bulkhead-audit-checkpoint\n".to_vec();
    m.extend_from_slice(body.as_bytes());
    m
}

/// The `prev` of checkpoint 0.
pub fn genesis() -> String {
    super::chain::hex(&Sha256::digest(b"bulkhead-audit-checkpoints"))
}

/// What one writer changes in the next checkpoint.
#[derive(Debug, Default)]
pub struct Update {
    /// The writer making it.
    pub writer: String,
    /// Its own head (its `floor` and `sealed` are kept from the newest checkpoint).
    pub head: Option<WriterHead>,
    /// Floors of writers whose records a rotation is about to drop.
    pub floors: Vec<(String, Floor)>,
    /// Writers to close: (id, the `seq` the newest checkpoint must still name, the head).
    pub seals: Vec<(String, i64, WriterHead)>,
    /// Now (Unix seconds).
    pub now: i64,
}

/// Whether a writer's every record was dropped by rotation and it will write no more.
pub fn retired(h: &WriterHead) -> bool {
    h.closed && h.floor.as_ref().is_some_and(|f| f.seq as i64 >= h.seq)
}

/// The checkpoint after `newest` (hash `newest_hash`) with `u` applied: retired writers leave,
/// floors and seals apply, the writer's own head is set.
pub fn next(newest: Option<(&Checkpoint, String)>, u: &Update) -> Checkpoint {
    let (n, prev, mut writers) = match newest {
        Some((c, hash)) => (c.n + 1, hash, c.writers.clone()),
        None => (0, genesis(), BTreeMap::new()),
    };
    writers.retain(|_, h| !retired(h));
    for (w, floor) in &u.floors {
        if let Some(h) = writers.get_mut(w)
            && h.floor.as_ref().is_none_or(|f| f.seq < floor.seq)
        {
            h.floor = Some(floor.clone());
        }
    }
    for (w, from, sealed) in &u.seals {
        if let Some(h) = writers.get_mut(w)
            && h.seq == *from
            && !h.closed
        {
            let floor = h.floor.take();
            *h = sealed.clone();
            h.floor = floor;
        }
    }
    if let Some(head) = &u.head {
        let mut head = head.clone();
        if let Some(old) = writers.get(&u.writer) {
            head.floor = old.floor.clone();
        }
        writers.insert(u.writer.clone(), head);
    }
    Checkpoint {
        n,
        prev,
        at: u.now,
        by: u.writer.clone(),
        writers,
    }
}

/// Why `later` cannot follow `earlier` (None: it can). `adjacent`: `later` must be the very next
/// checkpoint, naming `earlier_hash`.
pub fn consistent(
    earlier: &Checkpoint,
    earlier_hash: &str,
    later: &Checkpoint,
    adjacent: bool,
) -> Option<String> {
    if later.n <= earlier.n {
        return Some(format!(
            "checkpoint #{} is not newer than #{}",
            later.n, earlier.n
        ));
    }
    if adjacent && (later.n != earlier.n + 1 || later.prev != earlier_hash) {
        return Some(format!(
            "checkpoint #{} does not name #{} as the one before it",
            later.n, earlier.n
        ));
    }
    for (w, a) in &earlier.writers {
        let Some(b) = later.writers.get(w) else {
            if retired(a) {
                continue;
            }
            return Some(format!(
                "writer {w} ({}) at seq {} in #{} is gone from #{} without its records having been rotated away",
                a.server, a.seq, earlier.n, later.n
            ));
        };
        if b.server != a.server {
            return Some(format!("writer {w} changed server in #{}", later.n));
        }
        if b.seq < a.seq || (b.seq == a.seq && b.hash != a.hash) {
            return Some(format!(
                "writer {w} ({}) goes back from seq {} in #{} to seq {} in #{}",
                a.server, a.seq, earlier.n, b.seq, later.n
            ));
        }
        if a.closed && (!b.closed || b.seq != a.seq) {
            return Some(format!(
                "writer {w} ({}) closed at seq {} in #{} and moves again in #{}",
                a.server, a.seq, earlier.n, later.n
            ));
        }
        let floor = |h: &WriterHead| h.floor.as_ref().map_or(-1, |f| f.seq as i64);
        if floor(b) < floor(a) {
            return Some(format!(
                "writer {w} ({}): its rotation floor goes back in #{}",
                a.server, later.n
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(seq: i64, closed: bool) -> WriterHead {
        WriterHead {
            server: "s".into(),
            seq,
            hash: format!("h{seq}"),
            closed,
            floor: None,
            sealed: None,
            at: 0,
        }
    }

    #[test]
    fn checkpoints_move_forward_and_retire_only_rotated_out_closed_writers() {
        let mut u = Update {
            writer: "a".into(),
            head: Some(head(-1, false)),
            ..Default::default()
        };
        let c0 = Stored::seal(next(None, &u), None);
        assert_eq!(c0.checkpoint.n, 0);
        assert_eq!(c0.checkpoint.prev, genesis());
        u.head = Some(head(4, true));
        let c1 = Stored::seal(next(Some((&c0.checkpoint, c0.hash())), &u), None);
        assert_eq!(
            consistent(&c0.checkpoint, &c0.hash(), &c1.checkpoint, true),
            None
        );
        // Back in time, or skipping a number.
        assert!(consistent(&c1.checkpoint, &c1.hash(), &c0.checkpoint, false).is_some());
        let mut skipped = c1.checkpoint.clone();
        skipped.n = 2;
        assert!(consistent(&c0.checkpoint, &c0.hash(), &skipped, true).is_some());
        // A writer dropped without rotation is refused; after its floor passed its head, not.
        let mut gone = c1.checkpoint.clone();
        gone.n = 2;
        gone.writers.clear();
        assert!(consistent(&c1.checkpoint, &c1.hash(), &gone, false).is_some());
        let floored = Update {
            writer: "b".into(),
            floors: vec![(
                "a".into(),
                Floor {
                    seq: 4,
                    hash: "h4".into(),
                },
            )],
            ..Default::default()
        };
        let c2 = next(Some((&c1.checkpoint, c1.hash())), &floored);
        assert!(c2.writers.contains_key("a"));
        let c2 = Stored::seal(c2, None);
        let c3 = next(
            Some((&c2.checkpoint, c2.hash())),
            &Update {
                writer: "b".into(),
                ..Default::default()
            },
        );
        assert!(!c3.writers.contains_key("a"));
        assert_eq!(consistent(&c2.checkpoint, &c2.hash(), &c3, true), None);
    }

    #[test]
    fn a_signature_covers_the_stored_bytes() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
        let u = Update {
            writer: "a".into(),
            head: Some(head(3, false)),
            ..Default::default()
        };
        let s = Stored::seal(next(None, &u), Some(&key));
        assert!(s.signed_by(&key.verifying_key()));
        let forged =
            Stored::parse(s.body.replace("\"seq\":3", "\"seq\":2"), s.sig.clone()).unwrap();
        assert!(!forged.signed_by(&key.verifying_key()));
    }
}
