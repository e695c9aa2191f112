//! Blocking producers → bounded async streams: a producer runs on `spawn_blocking` and hands
//! chunks over a channel in batches of at most [`BATCH`] chunks or [`BATCH_BYTES`] bytes, with as
//! many batches in flight as the call's memory budget allows, so a result never sits in memory
//! whole and one call never holds more than its budget. The producer stops as soon as the
//! consumer drops the stream or the call is cancelled ([`Sink::tick`] checks at most every
//! [`TICK_BYTES`] bytes or [`TICK_STEPS`] steps of work, and reports progress at the same rate).

use futures::StreamExt as _;
use tokio::sync::mpsc;

use crate::errors::ToolError;
use crate::server::{Chunk, ToolOutput, ToolResult};
use crate::signals::{CallSignals, Unit};

/// Most chunks per batch (one channel hand-over per batch keeps the per-row cost low).
pub const BATCH: usize = 256;
/// The nice value of a connector's producer thread (0 is normal, 19 the lowest priority).
const BACKGROUND_NICE: i32 = 10;

/// A batch is handed over once it holds this many bytes (one chunk may overshoot it).
pub const BATCH_BYTES: usize = 64 << 10;

/// Work between two cancellation checks and progress updates, in bytes...
pub const TICK_BYTES: u64 = 64 << 10;
/// ...or in steps (lines, rows), whichever comes first.
pub const TICK_STEPS: u32 = 256;

/// How much memory one call's stream may hold in flight (`limits.call_memory_bytes`).
#[derive(Clone, Copy, Debug)]
pub struct StreamBudget {
    /// Bytes of chunks in flight between producer and consumer, at most.
    pub bytes: usize,
}

impl Default for StreamBudget {
    fn default() -> Self {
        StreamBudget { bytes: 8 << 20 }
    }
}

impl StreamBudget {
    /// Batches in flight: each holds under two [`BATCH_BYTES`] (a batch plus one long chunk).
    fn batches(self) -> usize {
        (self.bytes / (2 * BATCH_BYTES)).max(2)
    }
}

fn chunk_bytes(c: &Chunk) -> usize {
    match c {
        Chunk::Line(l) => l.len(),
        Chunk::Row(cells) => cells.iter().map(String::len).sum::<usize>() + cells.len(),
        Chunk::Bytes(b) => b.len(),
    }
}

type Batch = Vec<Result<Chunk, ToolError>>;

/// Why a producer stopped early.
pub enum Stop {
    /// The consumer went away: nothing more to do.
    Closed,
    /// The operation failed; the error ends the stream.
    Failed(ToolError),
}

impl From<ToolError> for Stop {
    fn from(e: ToolError) -> Stop {
        Stop::Failed(e)
    }
}

/// The producer's end: buffers chunks into batches and blocks while the channel is full.
pub struct Sink {
    tx: mpsc::Sender<Batch>,
    buf: Batch,
    buf_bytes: usize,
    signals: CallSignals,
    pending: u64,
    steps: u32,
}

impl Sink {
    /// Counts one step of work of `n` units (bytes read, or 1 per row); every [`TICK_BYTES`] or
    /// [`TICK_STEPS`] it publishes progress and stops the producer if the call was cancelled.
    pub fn tick(&mut self, n: u64) -> Result<(), Stop> {
        self.pending += n;
        self.steps += 1;
        if self.steps >= TICK_STEPS || self.pending >= TICK_BYTES {
            self.publish();
            if self.signals.is_stopped() {
                return Err(Stop::Closed);
            }
        }
        Ok(())
    }

    fn publish(&mut self) {
        self.signals.advance(self.pending);
        self.pending = 0;
        self.steps = 0;
    }

    /// Declares what progress counts and the whole, when known.
    pub fn set_total(&self, unit: Unit, total: Option<u64>) {
        self.signals.set_total(unit, total);
    }

    /// A warning for the client's log (no argument values, no host paths).
    pub fn warn(&self, text: impl Into<String>) {
        self.signals.warn(text);
    }

    /// The call's signals (for a producer that checks cancellation itself, e.g. SQLite's
    /// progress handler).
    pub fn signals(&self) -> &CallSignals {
        &self.signals
    }

    /// Sends one chunk (blocking when the consumer is behind).
    pub fn push(&mut self, chunk: Chunk) -> Result<(), Stop> {
        self.buf_bytes += chunk_bytes(&chunk);
        self.buf.push(Ok(chunk));
        if self.buf.len() >= BATCH || self.buf_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Stop> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.signals.is_stopped() {
            return Err(Stop::Closed);
        }
        let batch = std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH));
        self.buf_bytes = 0;
        self.tx.blocking_send(batch).map_err(|_| Stop::Closed)
    }
}

/// Runs `produce` on a blocking thread and returns its chunks as a stream. An error before the
/// first chunk is returned directly (so setup failures are plain errors); a later one ends the
/// stream with that error. A cancelled call (`signals` stopped) ends the producer at its next
/// tick and the stream with it.
pub async fn run_blocking<F>(budget: StreamBudget, signals: &CallSignals, produce: F) -> ToolResult
where
    F: FnOnce(&mut Sink) -> Result<(), Stop> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Batch>(budget.batches());
    let signals = signals.clone();
    tokio::task::spawn_blocking(move || {
        // Long scans run below the request handlers' priority (nice 10, this thread only on
        // Linux), so a heavy search slows other searches, not every other client's call.
        let _ = rustix::process::setpriority_process(None, BACKGROUND_NICE);
        let mut sink = Sink {
            tx,
            buf: Vec::with_capacity(BATCH),
            buf_bytes: 0,
            signals,
            pending: 0,
            steps: 0,
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| produce(&mut sink)))
            .unwrap_or_else(|_| {
                Err(Stop::Failed(ToolError::bug(
                    "connector stopped unexpectedly",
                )))
            });
        sink.publish();
        match outcome {
            Ok(()) => {
                let _ = sink.flush();
            }
            Err(Stop::Closed) => {}
            Err(Stop::Failed(e)) => {
                sink.buf.push(Err(e));
                let _ = sink.flush();
            }
        }
    });
    let first = rx.recv().await.unwrap_or_default();
    if let Some(Err(e)) = first.first() {
        return Err(e.clone());
    }
    let rest = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|batch| (batch, rx))
    });
    let all = futures::stream::iter([first])
        .chain(rest)
        .flat_map(futures::stream::iter);
    Ok(ToolOutput::Stream(all.boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fast producer of 64 KiB lines and a slow consumer: the bytes in flight between them
    /// never exceed the budget (plus one batch being filled and one being read).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fast_producer_stays_within_the_memory_budget() {
        let budget = StreamBudget { bytes: 1 << 20 };
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (f, p) = (in_flight.clone(), peak.clone());
        let line = "x".repeat(64 << 10);
        let out = run_blocking(budget, &CallSignals::new(), move |sink| {
            for _ in 0..400 {
                let now = f.fetch_add(line.len(), Ordering::SeqCst) + line.len();
                p.fetch_max(now, Ordering::SeqCst);
                sink.push(Chunk::Line(line.clone()))?;
            }
            Ok(())
        })
        .await
        .unwrap();
        let ToolOutput::Stream(mut s) = out else {
            panic!("a stream")
        };
        let mut n = 0;
        while let Some(item) = s.next().await {
            if let Ok(Chunk::Line(l)) = item {
                in_flight.fetch_sub(l.len(), Ordering::SeqCst);
                n += 1;
                if n % 16 == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
            }
        }
        assert_eq!(n, 400);
        let peak = peak.load(Ordering::SeqCst);
        // 25 MiB were produced; in flight never more than the budget and two batches.
        assert!(
            peak <= budget.bytes + 4 * BATCH_BYTES,
            "peak {peak} bytes in flight"
        );
    }
}
