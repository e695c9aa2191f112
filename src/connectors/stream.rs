//! Blocking producers → bounded async streams: a producer runs on `spawn_blocking` and hands
//! chunks over a channel of at most [`CAPACITY`] batches, so a result never sits in memory whole.
//! The producer stops as soon as the consumer drops the stream.

use futures::StreamExt as _;
use tokio::sync::mpsc;

use crate::errors::ToolError;
use crate::server::{Chunk, ToolOutput, ToolResult};

/// Batches in flight between producer and consumer.
pub const CAPACITY: usize = 64;
/// Chunks per batch (one channel hand-over per batch keeps the per-row cost low).
pub const BATCH: usize = 256;

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
}

impl Sink {
    /// Sends one chunk (blocking when the consumer is behind).
    pub fn push(&mut self, chunk: Chunk) -> Result<(), Stop> {
        self.buf.push(Ok(chunk));
        if self.buf.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Stop> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH));
        self.tx.blocking_send(batch).map_err(|_| Stop::Closed)
    }
}

/// Runs `produce` on a blocking thread and returns its chunks as a stream. An error before the
/// first chunk is returned directly (so setup failures are plain errors); a later one ends the
/// stream with that error.
pub async fn run_blocking<F>(produce: F) -> ToolResult
where
    F: FnOnce(&mut Sink) -> Result<(), Stop> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Batch>(CAPACITY);
    tokio::task::spawn_blocking(move || {
        let mut sink = Sink {
            tx,
            buf: Vec::with_capacity(BATCH),
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| produce(&mut sink)))
            .unwrap_or_else(|_| {
                Err(Stop::Failed(ToolError::bug(
                    "connector stopped unexpectedly",
                )))
            });
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
