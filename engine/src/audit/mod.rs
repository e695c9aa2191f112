//! The write-ahead audit log of call decisions.
//!
//! Rule: anything that can leave the process or raise a level is written ahead. A `connect` call
//! and an escalating call run only after their [`Phase::Intent`] record is durable (synced to disk
//! or committed to PostgreSQL); if it cannot be written, the call is refused. Every call's
//! [`Phase::Outcome`] follows. Plain reads and writes inside the deployment write only an
//! outcome, batched and synced at least every `sync_interval` (a crash can lose that last
//! interval of them; nothing irreversible depends on those lines). While the log cannot be written,
//! or more than `max_backlog_bytes` wait to be written, every call is refused
//! ([`AuditLog::healthy`]).
//!
//! One writer thread per process batches records: concurrent intents share one sync.
//!
//! A call that finds more than half of `max_backlog_bytes` waiting waits for the writer to bring
//! it under half again, at most [`BACKPRESSURE_WAIT`] ([`AuditLog::room`]): under a sink slower
//! than the calls (a PostgreSQL sink sharing a core with the server), calls slow to the sink's
//! pace instead of reaching the limit, which refuses them all.
//!
//! The same thread links every record into its hash chain ([`chain`]) in the order it writes
//! them, and commits the chain's head into the store's checkpoints ([`checkpoint`], [`heads`])
//! once the records it covers are durable: at most every `sync_interval`, at least every third
//! of `audit.lease` (idle), before rotation drops a file, and at shutdown ([`checkpointer`]).
//! `bulkhead audit verify` ([`verify`]) checks the log against them.

pub mod chain;
pub mod checkpoint;
mod checkpointer;
mod file;
pub mod heads;
mod postgres;
mod record;
mod redact;
pub mod verify;

pub use file::{AuditFile, for_each_line};
pub use postgres::PgAuditSink;
pub(crate) use record::cut_name;
pub use record::{ArgsSummary, AuditRecord, Outcome, Phase};
pub use redact::Redactor;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Limits and timing of the audit log (`audit:` in config.yaml).
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// Largest record, in bytes (the detail is cut to fit).
    pub max_record_bytes: usize,
    /// Size at which the file is rotated.
    pub rotate_bytes: u64,
    /// Rotated files kept.
    pub keep: usize,
    /// Longest time an outcome record waits before it is synced.
    pub sync_interval: Duration,
    /// Most bytes waiting to be written before calls are refused.
    pub max_backlog_bytes: usize,
    /// Whether records are hash-chained.
    pub chain: bool,
    /// The key that signs checkpoints.
    pub signing_key: Option<std::path::PathBuf>,
    /// How long a writer's head may go unrefreshed before another writer of its server closes
    /// it as stopped (idle writers refresh every third of it).
    pub lease: Duration,
    /// Checkpoints kept in the store (older ones are deleted as new ones are committed).
    pub checkpoints_kept: u64,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            max_record_bytes: 4096,
            rotate_bytes: 64 << 20,
            keep: 5,
            sync_interval: Duration::from_secs(1),
            max_backlog_bytes: 16 << 20,
            chain: true,
            signing_key: None,
            lease: Duration::from_secs(60),
            checkpoints_kept: 1000,
        }
    }
}

/// Why an audit record could not be written. The caller refuses the call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    /// Writing or syncing failed (the detail may name host paths: for logs only).
    #[error("audit log cannot be written: {0}")]
    Io(String),
    /// The record could not be serialised.
    #[error("audit record cannot be serialised: {0}")]
    Serialize(String),
    /// Too many bytes are waiting to be written.
    #[error("audit log backlog is over its limit of {0} bytes")]
    Backlog(usize),
    /// The writer has stopped.
    #[error("audit writer stopped")]
    Stopped,
}

impl AuditError {
    /// What the model may read (no host paths).
    pub fn for_model(&self) -> String {
        match self {
            AuditError::Backlog(n) => format!("the audit log is behind by more than {n} bytes"),
            _ => "the audit log cannot be written".into(),
        }
    }
}

/// Where records go.
pub trait AuditSink: Send + 'static {
    /// Appends whole lines; makes them durable when `sync`.
    fn append(&mut self, lines: &[u8], count: usize, sync: bool) -> Result<(), String>;
    /// Makes everything appended durable.
    fn sync(&mut self) -> Result<(), String>;
    /// Whether every append is durable once it returns (a committed insert).
    fn durable_on_append(&self) -> bool {
        false
    }
    /// Rotates when due; `before_drop` gets the floors of the writers whose records a rotation
    /// is about to drop (and may refuse it).
    fn rotate(&mut self, _before_drop: &mut file::Floors<'_>) -> Result<(), String> {
        Ok(())
    }
    /// The last record of `writer` that continues its chain from `seq` (hash `hash`), if any.
    fn tail(
        &mut self,
        _writer: &str,
        _seq: i64,
        _hash: &str,
    ) -> Result<Option<(u64, String)>, String> {
        Ok(None)
    }
}

impl AuditSink for AuditFile {
    fn append(&mut self, lines: &[u8], _count: usize, sync: bool) -> Result<(), String> {
        AuditFile::append(self, lines, sync).map_err(|e| format!("{}: {e}", self.path().display()))
    }

    fn sync(&mut self) -> Result<(), String> {
        AuditFile::sync(self).map_err(|e| format!("{}: {e}", self.path().display()))
    }

    fn rotate(&mut self, before_drop: &mut file::Floors<'_>) -> Result<(), String> {
        AuditFile::rotate(self, before_drop)
    }

    fn tail(
        &mut self,
        writer: &str,
        seq: i64,
        hash: &str,
    ) -> Result<Option<(u64, String)>, String> {
        AuditFile::tail(self, writer, seq, hash)
            .map_err(|e| format!("{}: {e}", self.path().display()))
    }
}

struct Msg {
    line: Vec<u8>,
    ack: Option<tokio::sync::oneshot::Sender<Result<(), AuditError>>>,
}

struct Shared {
    healthy: AtomicBool,
    /// Bytes sent and not yet written (raised by a sender before it sends).
    backlog: AtomicUsize,
    last_error: Mutex<Option<String>>,
    /// The writer thread, woken at once for an intent (outcomes wait for its next round).
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// The writer sleeps until woken: nothing was queued, dirty or due when it looked.
    asleep: AtomicBool,
    /// Notified after every round that wrote (callers waiting for room, [`AuditLog::room`]).
    drained: tokio::sync::Notify,
}

/// Longest a call waits for the backlog to fall under half of its limit.
pub const BACKPRESSURE_WAIT: Duration = Duration::from_secs(1);

impl Shared {
    /// Wakes the writer if it sleeps with nothing to do (see [`writer`]).
    fn wake_if_asleep(&self) {
        if self.asleep.load(Ordering::SeqCst)
            && self.asleep.swap(false, Ordering::SeqCst)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }
}

/// Longest the writer sleeps between rounds while records wait to be synced or anchored.
const IDLE_ROUND: Duration = Duration::from_millis(20);

/// A handle on the audit log; cheap to clone. The writer thread stops (after writing and syncing
/// everything queued) when the last handle is dropped.
#[derive(Clone)]
pub struct AuditLog {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
    options: Arc<AuditOptions>,
    _joiner: Arc<Joiner>,
}

struct Joiner(
    Mutex<Option<std::thread::JoinHandle<()>>>,
    Mutex<Option<Sender<Msg>>>,
);

impl Drop for Joiner {
    fn drop(&mut self) {
        drop(self.1.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(h) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("healthy", &self.healthy())
            .finish()
    }
}

impl AuditLog {
    /// Opens the JSON-lines file at `path` and starts its writer (chained, no checkpoints).
    pub fn open_file(
        path: &std::path::Path,
        options: AuditOptions,
    ) -> Result<AuditLog, AuditError> {
        let file = AuditFile::open(path, options.rotate_bytes, options.keep)
            .map_err(|e| AuditError::Io(format!("{}: {e}", path.display())))?;
        Ok(AuditLog::start(Box::new(file), options))
    }

    /// Starts a writer over any sink (chained when the options say so, no checkpoints).
    pub fn start(sink: Box<dyn AuditSink>, options: AuditOptions) -> AuditLog {
        AuditLog::start_checkpointed(sink, options, "-", None).expect("no signing key to read")
    }

    /// Starts the writer of `server`'s log over `sink`, committing its chain's heads into the
    /// checkpoints of `heads`.
    pub fn start_checkpointed(
        sink: Box<dyn AuditSink>,
        options: AuditOptions,
        server: &str,
        heads: Option<Box<dyn heads::Heads>>,
    ) -> Result<AuditLog, AuditError> {
        let signer = match &options.signing_key {
            Some(path) => Some(chain::read_signing_key(path).map_err(AuditError::Io)?),
            None => None,
        };
        let chain = options.chain.then(|| chain::Chain::new(server));
        let checkpoints = match (&chain, heads) {
            (Some(_), Some(h)) => Some(checkpointer::Checkpointer::new(h, signer, options.lease)),
            _ => None,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            healthy: AtomicBool::new(true),
            backlog: AtomicUsize::new(0),
            last_error: Mutex::new(None),
            thread: std::sync::OnceLock::new(),
            asleep: AtomicBool::new(false),
            drained: tokio::sync::Notify::new(),
        });
        let writer_shared = shared.clone();
        let interval = options.sync_interval;
        // The handles hold clones of `tx`; the joiner's own clone is dropped first so the thread
        // sees the channel close when the last handle goes.
        let thread = std::thread::Builder::new()
            .name("bulkhead-audit".into())
            .spawn(move || writer(sink, rx, writer_shared, interval, chain, checkpoints))
            .expect("spawn the audit writer");
        let _ = shared.thread.set(thread.thread().clone());
        Ok(AuditLog {
            tx: tx.clone(),
            shared,
            options: Arc::new(options),
            _joiner: Arc::new(Joiner(Mutex::new(Some(thread)), Mutex::new(Some(tx)))),
        })
    }

    /// Whether calls may run: the last write succeeded and the backlog is under its limit.
    pub fn healthy(&self) -> Result<(), AuditError> {
        if !self.shared.healthy.load(Ordering::Acquire) {
            let e = self
                .shared
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            return Err(AuditError::Io(e.unwrap_or_default()));
        }
        let max = self.options.max_backlog_bytes;
        if self.shared.backlog.load(Ordering::Relaxed) > max {
            return Err(AuditError::Backlog(max));
        }
        Ok(())
    }

    /// Whether more than half of `max_backlog_bytes` waits to be written (see [`Self::room`]).
    pub fn behind(&self) -> bool {
        self.shared.backlog.load(Ordering::Relaxed) > self.options.max_backlog_bytes / 2
    }

    /// Waits while more than half of `max_backlog_bytes` waits to be written and the writer
    /// works, for at most [`BACKPRESSURE_WAIT`]; [`Self::healthy`] then decides as before.
    pub async fn room(&self) {
        let deadline = tokio::time::Instant::now() + BACKPRESSURE_WAIT;
        while self.behind() && self.shared.healthy.load(Ordering::Acquire) {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if !self.behind() {
                break;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                break;
            }
        }
    }

    /// Queues a record; it is written in the next batch and synced within the sync interval.
    pub fn append(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let line = record
            .to_line(self.options.max_record_bytes)
            .map_err(|e| AuditError::Serialize(e.to_string()))?;
        self.send(line, None)
    }

    /// Writes a record and waits until it is durable (the write-ahead intent).
    pub async fn append_durable(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.healthy()?;
        let line = record
            .to_line(self.options.max_record_bytes)
            .map_err(|e| AuditError::Serialize(e.to_string()))?;
        let (ack, done) = tokio::sync::oneshot::channel();
        self.send(line, Some(ack))?;
        if let Some(t) = self.shared.thread.get() {
            t.unpark();
        }
        done.await.map_err(|_| AuditError::Stopped)?
    }

    fn send(
        &self,
        line: Vec<u8>,
        ack: Option<tokio::sync::oneshot::Sender<Result<(), AuditError>>>,
    ) -> Result<(), AuditError> {
        self.shared.backlog.fetch_add(line.len(), Ordering::SeqCst);
        self.tx
            .send(Msg { line, ack })
            .map_err(|_| AuditError::Stopped)?;
        self.shared.wake_if_asleep();
        Ok(())
    }
}

/// The writer loop: drain what is queued (linking each line into the chain), write it in one
/// append, sync when an intent waits or the interval has passed, rotate when the file is full
/// (committing the floors of a file it drops first), commit the chain's head into a checkpoint
/// once what it covers is durable (at most every interval, and at the end), answer the waiting
/// intents; then sleep until an intent wakes it or [`IDLE_ROUND`] passes. Senders of outcomes
/// do not wake it while it works: no context switch per call.
///
/// An idle process barely wakes it either. When a whole timed round ([`IDLE_ROUND`]) brought
/// nothing, and nothing written is unsynced, the chain's head is committed and no commit error
/// waits to be retried, the writer marks itself asleep, looks at the backlog once more and parks
/// until the next sender wakes it, or (with checkpoints) until its head needs refreshing, a
/// third of `audit.lease` later. Under steady traffic it never gets there, so records keep
/// arriving in batches of a round (a PostgreSQL sink pays per statement; woken per record, it
/// fell behind at 41k calls/s). No record waits for a sleeping writer: a sender raises the
/// backlog before it sends and reads the mark after, the writer sets the mark before it reads
/// the backlog (both sequentially consistent), so one of the two sees the other.
fn writer(
    mut sink: Box<dyn AuditSink>,
    rx: Receiver<Msg>,
    shared: Arc<Shared>,
    interval: Duration,
    mut chain: Option<chain::Chain>,
    mut checkpoints: Option<checkpointer::Checkpointer>,
) {
    let mut dirty = false;
    let mut last_sync = Instant::now();
    let mut buf = Vec::with_capacity(64 << 10);
    let mut acks = Vec::new();
    let mut open = true;
    // The writer is in a checkpoint before it writes anything (its head at seq -1), so a writer
    // id no checkpoint names is evidence of a record appended by hand.
    let mut commit_error = match (checkpoints.as_mut(), chain.as_mut()) {
        (Some(cp), Some(c)) => commit(cp, c, false, Vec::new()).err(),
        _ => None,
    };
    if let Some(e) = &commit_error {
        tracing::error!(error = %e, "audit checkpoint cannot be committed; refusing calls until it can");
        *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
        shared.healthy.store(false, Ordering::Release);
    }
    // The last round was a timed park that nothing interrupted with a record.
    let mut quiet_round = false;
    while open {
        let mut count = 0;
        let mut queued = 0;
        while buf.len() < (1 << 20) {
            match rx.try_recv() {
                Ok(m) => {
                    queued += m.line.len();
                    match chain.as_mut() {
                        Some(c) => c.link_into(&mut buf, &m.line),
                        None => buf.extend_from_slice(&m.line),
                    }
                    count += 1;
                    if let Some(a) = m.ack {
                        acks.push(a);
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        let sync = !acks.is_empty() || (dirty && (last_sync.elapsed() >= interval || !open));
        let commit_due = match (&checkpoints, &chain) {
            (Some(cp), Some(c)) => {
                (commit_error.is_some() && !cp.current(c, !open)) || cp.due(c, !open, interval)
            }
            _ => false,
        };
        if buf.is_empty() && !sync && !commit_due {
            if !open {
                continue;
            }
            let committed = match (&checkpoints, &chain) {
                (Some(cp), Some(c)) => cp.current(c, false),
                _ => true,
            };
            if quiet_round && !dirty && committed && commit_error.is_none() {
                shared.asleep.store(true, Ordering::SeqCst);
                if shared.backlog.load(Ordering::SeqCst) == 0 {
                    match &checkpoints {
                        Some(cp) => std::thread::park_timeout(cp.heartbeat()),
                        None => std::thread::park(),
                    }
                }
                shared.asleep.store(false, Ordering::SeqCst);
                quiet_round = false;
            } else {
                std::thread::park_timeout(IDLE_ROUND.min(interval));
                quiet_round = true;
            }
            continue;
        }
        quiet_round = false;
        let mut result = if buf.is_empty() {
            if sync || commit_due {
                sink.sync()
            } else {
                Ok(())
            }
        } else {
            crate::failpoint!("audit.before_write");
            sink.append(&buf, count, sync || commit_due)
        };
        shared.backlog.fetch_sub(queued, Ordering::Relaxed);
        shared.drained.notify_waiters();
        let synced = sync || commit_due || sink.durable_on_append();
        if result.is_ok() && !buf.is_empty() {
            // A file about to be dropped is evidence first: its floors go into a checkpoint.
            let rotated = match (checkpoints.as_mut(), chain.as_mut()) {
                (Some(cp), Some(c)) => sink.rotate(&mut |floors| commit(cp, c, false, floors)),
                _ => sink.rotate(&mut |_| Ok(())),
            };
            if let Err(e) = rotated {
                result = Err(e);
            }
        }
        // A due commit was synced with this round's records above: only now may a checkpoint
        // say the log holds them.
        if result.is_ok()
            && commit_due
            && let (Some(cp), Some(c)) = (checkpoints.as_mut(), chain.as_mut())
        {
            crate::failpoint!("audit.before_anchor");
            match commit(cp, c, !open, Vec::new()) {
                Ok(()) => commit_error = None,
                Err(e) => {
                    commit_error = Some(e.clone());
                    result = Err(e);
                }
            }
            if open {
                cp.find_stale(c.writer(), &mut *sink);
            }
        }
        match &result {
            Ok(()) => {
                shared.healthy.store(true, Ordering::Release);
                dirty = !synced && (dirty || !buf.is_empty());
                if synced {
                    last_sync = Instant::now();
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "audit log write failed; refusing calls until it works");
                *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                shared.healthy.store(false, Ordering::Release);
            }
        }
        for a in acks.drain(..) {
            let _ = a.send(result.clone().map_err(AuditError::Io));
        }
        buf.clear();
    }
}

/// Commits `chain`'s head; when another writer closed this one as stale, goes on under a new
/// writer id (the records written after that close are then evidence for `verify`).
fn commit(
    cp: &mut checkpointer::Checkpointer,
    chain: &mut chain::Chain,
    closed: bool,
    floors: Vec<(String, checkpoint::Floor)>,
) -> Result<(), String> {
    match cp.commit(chain, closed, floors.clone()) {
        Ok(()) => Ok(()),
        Err(checkpointer::CommitError::Store(e)) => Err(e),
        Err(checkpointer::CommitError::Sealed(e)) => {
            tracing::error!(error = %e, "this audit writer was closed as stale by another; going on under a new writer id");
            chain.renew();
            cp.committed = None;
            cp.commit(chain, closed, floors).map_err(|e| match e {
                checkpointer::CommitError::Store(e) | checkpointer::CommitError::Sealed(e) => e,
            })
        }
    }
}

static CALL_PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
static CALL_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A new correlation id for a call: a per-process random prefix and a counter, e.g. `5f0c9e1a-2a`.
pub fn new_call_id() -> String {
    let prefix = CALL_PREFIX.get_or_init(|| {
        let mut b = [0u8; 4];
        getrandom::fill(&mut b).expect("the OS random source works");
        b.iter().map(|x| format!("{x:02x}")).collect()
    });
    let n = CALL_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{n:x}")
}
