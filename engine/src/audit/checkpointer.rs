//! The audit writer's side of the checkpoints: it commits its head into the store's chain
//! ([`super::checkpoint`]) once the records it covers are durable, refuses to build on a newest
//! checkpoint that is not signed by the audit key or is older than one it already saw (a store
//! rolled back under a running writer), refreshes its head while idle (every third of
//! `audit.lease`), and closes writers of its server whose head went stale (a process that
//! stopped without closing) at the last record of theirs the log holds.

use super::AuditSink;
use super::chain::Chain;
use super::checkpoint::{self, Floor, Seal, Stored, Update, WriterHead};
use super::heads::Heads;
use std::time::{Duration, Instant};

/// Why a checkpoint could not be committed.
#[derive(Debug)]
pub(crate) enum CommitError {
    /// The store failed, or its newest checkpoint cannot be built on.
    Store(String),
    /// Another writer closed this one as stale: its chain cannot go on.
    Sealed(String),
}

/// Commits one writer's checkpoints.
pub(crate) struct Checkpointer {
    heads: Box<dyn Heads>,
    key: Option<ed25519_dalek::SigningKey>,
    lease: Duration,
    /// The newest checkpoint this writer saw (number, hash).
    seen: Option<(u64, String)>,
    /// Its own head as last committed (seq, closed).
    pub(crate) committed: Option<(i64, bool)>,
    last_commit: Instant,
    /// Stale writers found in the newest checkpoint, to be sealed.
    stale: Vec<(String, WriterHead)>,
    seals: Vec<(String, i64, WriterHead)>,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Checkpointer {
    /// A committer into `heads`, signing with `key`; a head older than `lease` is stale.
    pub(crate) fn new(
        heads: Box<dyn Heads>,
        key: Option<ed25519_dalek::SigningKey>,
        lease: Duration,
    ) -> Checkpointer {
        Checkpointer {
            heads,
            key,
            lease,
            seen: None,
            committed: None,
            last_commit: Instant::now(),
            stale: Vec::new(),
            seals: Vec::new(),
        }
    }

    /// How often an idle writer refreshes its head.
    pub(crate) fn heartbeat(&self) -> Duration {
        self.lease / 3
    }

    /// Whether a commit is due: the head moved (and `interval` passed, or the writer closes), a
    /// heartbeat is due, or stale writers wait to be sealed.
    pub(crate) fn due(&self, chain: &Chain, closed: bool, interval: Duration) -> bool {
        let moved = self.committed != Some((chain.last_seq(), closed));
        let elapsed = self.last_commit.elapsed();
        (moved && (closed || elapsed >= interval))
            || elapsed >= self.heartbeat()
            || !self.seals.is_empty()
    }

    /// Whether this writer's own head is committed as it is.
    pub(crate) fn current(&self, chain: &Chain, closed: bool) -> bool {
        self.committed == Some((chain.last_seq(), closed)) && self.seals.is_empty()
    }

    /// Commits the chain's head (with `floors` of a file about to be dropped).
    pub(crate) fn commit(
        &mut self,
        chain: &Chain,
        closed: bool,
        floors: Vec<(String, Floor)>,
    ) -> Result<(), CommitError> {
        let me = chain.writer().to_owned();
        let server = chain.server().to_owned();
        let t = now();
        let update = Update {
            writer: me.clone(),
            head: Some(WriterHead {
                server: server.clone(),
                seq: chain.last_seq(),
                hash: chain.last_hash(),
                closed,
                floor: None,
                sealed: None,
                at: t,
            }),
            floors,
            seals: self.seals.clone(),
            now: t,
        };
        let verifying = self.key.as_ref().map(|k| k.verifying_key());
        let seen = self.seen.clone();
        let committed = self.committed;
        let lease = self.lease.as_secs() as i64;
        let mut stale = Vec::new();
        let mut sealed_by = None;
        let mut make = |newest: Option<&Stored>| {
            if let (Some(k), Some(n)) = (&verifying, newest)
                && !n.signed_by(k)
            {
                return Err(format!(
                    "the store's newest audit checkpoint (#{}) is not signed by the audit key: its checkpoints were tampered with",
                    n.checkpoint.n
                ));
            }
            if let Some((n, hash)) = &seen {
                match newest {
                    None => {
                        return Err(format!(
                            "the store holds no audit checkpoint, yet this writer saw #{n}: its checkpoints were removed"
                        ));
                    }
                    Some(s)
                        if s.checkpoint.n < *n || (s.checkpoint.n == *n && &s.hash() != hash) =>
                    {
                        return Err(format!(
                            "the store's newest audit checkpoint is #{}, older than or different from #{n} this writer saw: its checkpoints were rolled back",
                            s.checkpoint.n
                        ));
                    }
                    Some(_) => {}
                }
            }
            let newest = newest.map(|s| (&s.checkpoint, s.hash()));
            if let Some((c, _)) = &newest {
                if committed.is_some() && !c.writers.contains_key(&me) {
                    return Err(format!(
                        "the store's newest audit checkpoint (#{}) no longer names this writer: it was altered",
                        c.n
                    ));
                }
                if let Some(own) = c.writers.get(&me) {
                    if let Some(seal) = &own.sealed {
                        sealed_by = Some(seal.by.clone());
                        return Err(format!("writer {me} was closed by writer {}", seal.by));
                    }
                    if committed.is_some_and(|(seq, _)| own.seq != seq) {
                        return Err(format!(
                            "the store's newest audit checkpoint names this writer at seq {}, not {}: it was altered",
                            own.seq,
                            committed.map_or(-1, |c| c.0)
                        ));
                    }
                }
                stale = c
                    .writers
                    .iter()
                    .filter(|(w, h)| {
                        **w != me && h.server == server && !h.closed && t - h.at > lease
                    })
                    .map(|(w, h)| (w.clone(), h.clone()))
                    .collect();
            }
            Ok(checkpoint::next(
                newest.as_ref().map(|(c, h)| (*c, h.clone())),
                &update,
            ))
        };
        let result = self.heads.commit(&mut make, self.key.as_ref());
        let stored = match result {
            Ok(s) => s,
            Err(e) => {
                return Err(match sealed_by {
                    Some(_) => CommitError::Sealed(e),
                    None => CommitError::Store(e),
                });
            }
        };
        self.seen = Some((stored.checkpoint.n, stored.hash()));
        self.committed = Some((chain.last_seq(), closed));
        self.last_commit = Instant::now();
        self.seals.clear();
        self.stale = stale;
        tracing::debug!(
            checkpoint = stored.checkpoint.n,
            hash = %stored.hash(),
            writers = stored.checkpoint.writers.len(),
            "audit checkpoint"
        );
        if closed {
            tracing::info!(
                checkpoint = stored.checkpoint.n,
                hash = %stored.hash(),
                "audit checkpoint at close (`bulkhead audit verify --anchor` takes this number and hash)"
            );
        }
        Ok(())
    }

    /// Finds, in `sink`, the last record of each stale writer found by the last commit, and
    /// queues its seal for the next commit.
    pub(crate) fn find_stale(&mut self, me: &str, sink: &mut dyn AuditSink) {
        for (w, head) in std::mem::take(&mut self.stale) {
            let last = match sink.tail(&w, head.seq, &head.hash) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(writer = %w, error = %e, "the records of a stale audit writer cannot be read; it stays open");
                    continue;
                }
            };
            let (seq, hash) = last.map_or((head.seq, head.hash.clone()), |(s, h)| (s as i64, h));
            tracing::warn!(
                writer = %w,
                signed = head.seq,
                seq,
                "an audit writer stopped without closing; closing it at its last record in the log"
            );
            self.seals.push((
                w,
                head.seq,
                WriterHead {
                    server: head.server,
                    seq,
                    hash,
                    closed: true,
                    floor: None,
                    sealed: Some(Seal {
                        by: me.to_owned(),
                        signed: head.seq,
                    }),
                    at: now(),
                },
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::heads::SqliteHeads;

    #[test]
    fn two_writers_extend_one_signed_chain() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        let key = ed25519_dalek::SigningKey::from_bytes(&[3u8; 32]);
        let mk = || {
            Checkpointer::new(
                Box::new(SqliteHeads::open(&db, 100).unwrap()),
                Some(key.clone()),
                Duration::from_secs(60),
            )
        };
        let (mut a, mut b) = (mk(), mk());
        let mut ca = Chain::new("s");
        let cb = Chain::new("s");
        a.commit(&ca, false, Vec::new()).unwrap();
        b.commit(&cb, false, Vec::new()).unwrap();
        ca.link(b"{\"x\":1}\n");
        a.commit(&ca, false, Vec::new()).unwrap();
        b.commit(&cb, true, Vec::new()).unwrap();
        let all = crate::audit::heads::read_sqlite(&db).unwrap();
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|s| s.signed_by(&key.verifying_key())));
        assert_eq!(all[3].checkpoint.writers[ca.writer()].seq, 0);
    }
}
