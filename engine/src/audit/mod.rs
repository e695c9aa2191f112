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
//! them, and anchors the chain's head in the state store once the records it covers are
//! durable: at most every `sync_interval`, and at shutdown ([`anchor`]). `bulkhead audit verify`
//! ([`verify`]) checks both.

pub mod anchor;
pub mod chain;
mod file;
mod postgres;
mod record;
mod redact;
pub mod verify;

pub use file::AuditFile;
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
    /// The key that signs anchored heads.
    pub signing_key: Option<std::path::PathBuf>,
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
}

impl AuditSink for AuditFile {
    fn append(&mut self, lines: &[u8], _count: usize, sync: bool) -> Result<(), String> {
        AuditFile::append(self, lines, sync).map_err(|e| format!("{}: {e}", self.path().display()))
    }

    fn sync(&mut self) -> Result<(), String> {
        AuditFile::sync(self).map_err(|e| format!("{}: {e}", self.path().display()))
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
    /// Opens the JSON-lines file at `path` and starts its writer (chained, heads not anchored).
    pub fn open_file(
        path: &std::path::Path,
        options: AuditOptions,
    ) -> Result<AuditLog, AuditError> {
        let file = AuditFile::open(path, options.rotate_bytes, options.keep)
            .map_err(|e| AuditError::Io(format!("{}: {e}", path.display())))?;
        Ok(AuditLog::start(Box::new(file), options))
    }

    /// Starts a writer over any sink (chained when the options say so, heads not anchored).
    pub fn start(sink: Box<dyn AuditSink>, options: AuditOptions) -> AuditLog {
        AuditLog::start_anchored(sink, options, "-", None).expect("no signing key to read")
    }

    /// Starts the writer of `server`'s log over `sink`, anchoring its chain's heads in `anchor`.
    pub fn start_anchored(
        sink: Box<dyn AuditSink>,
        options: AuditOptions,
        server: &str,
        anchor: Option<Box<dyn anchor::Anchor>>,
    ) -> Result<AuditLog, AuditError> {
        let signer = match &options.signing_key {
            Some(path) => Some(chain::read_signing_key(path).map_err(AuditError::Io)?),
            None => None,
        };
        let chain = options.chain.then(|| chain::Chain::new(server, signer));
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
            .spawn(move || writer(sink, rx, writer_shared, interval, chain, anchor))
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
/// append, sync when an intent waits or the interval has passed, anchor the chain's head once
/// what it covers is durable (at most every interval, and at the end), answer the waiting
/// intents; then sleep until an intent wakes it or [`IDLE_ROUND`] passes. Senders of outcomes
/// do not wake it while it works: no context switch per call.
///
/// An idle process does not wake it either. When a whole timed round ([`IDLE_ROUND`]) brought
/// nothing, and nothing written is unsynced, the chain's head is anchored and no anchor error
/// waits to be retried, the writer marks itself asleep, looks at the backlog once more and
/// parks with no timeout; the next sender wakes it. Under steady traffic it never gets there,
/// so records keep arriving in batches of a round (a PostgreSQL sink pays per statement; woken
/// per record, it fell behind at 41k calls/s). No record waits for a sleeping writer: a sender
/// raises the backlog before it sends and reads the mark after, the writer sets the mark before
/// it reads the backlog (both sequentially consistent), so one of the two sees the other.
fn writer(
    mut sink: Box<dyn AuditSink>,
    rx: Receiver<Msg>,
    shared: Arc<Shared>,
    interval: Duration,
    mut chain: Option<chain::Chain>,
    mut anchor: Option<Box<dyn anchor::Anchor>>,
) {
    let mut dirty = false;
    let mut last_sync = Instant::now();
    let mut buf = Vec::with_capacity(64 << 10);
    let mut acks = Vec::new();
    let mut open = true;
    // The writer is known to the store before it writes anything (its head at seq -1), so a
    // writer id nobody registered is evidence of a record appended by hand.
    let mut anchored: Option<(i64, bool)> = None;
    let mut last_anchor = Instant::now();
    let mut anchor_error = match (&chain, anchor.as_mut()) {
        (Some(c), Some(a)) => match a.anchor(&c.head(false)) {
            Ok(()) => {
                anchored = Some((-1, false));
                None
            }
            Err(e) => Some(e),
        },
        _ => None,
    };
    if let Some(e) = &anchor_error {
        tracing::error!(error = %e, "audit chain head cannot be anchored; refusing calls until it can");
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
        let anchor_due = anchor.is_some()
            && chain.as_ref().is_some_and(|c| {
                anchored != Some((c.last_seq(), !open))
                    && (!open || anchor_error.is_some() || last_anchor.elapsed() >= interval)
            });
        if buf.is_empty() && !sync && !anchor_due {
            if !open {
                continue;
            }
            let anchored_all = match (&chain, &anchor) {
                (Some(c), Some(_)) => anchored == Some((c.last_seq(), false)),
                _ => true,
            };
            if quiet_round && !dirty && anchored_all && anchor_error.is_none() {
                shared.asleep.store(true, Ordering::SeqCst);
                if shared.backlog.load(Ordering::SeqCst) == 0 {
                    std::thread::park();
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
            if sync || anchor_due {
                sink.sync()
            } else {
                Ok(())
            }
        } else {
            crate::failpoint!("audit.before_write");
            sink.append(&buf, count, sync || anchor_due)
        };
        shared.backlog.fetch_sub(queued, Ordering::Relaxed);
        shared.drained.notify_waiters();
        let synced = sync || anchor_due || sink.durable_on_append();
        // A due anchor was synced with this round's records above: only now may the store say
        // the log holds them.
        if result.is_ok()
            && anchor_due
            && let (Some(c), Some(a)) = (chain.as_ref(), anchor.as_mut())
        {
            let head = c.head(!open);
            crate::failpoint!("audit.before_anchor");
            match a.anchor(&head) {
                Ok(()) => {
                    anchored = Some((head.seq, head.closed));
                    last_anchor = Instant::now();
                    anchor_error = None;
                }
                Err(e) => {
                    anchor_error = Some(e.clone());
                    result = Err(e);
                }
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
