//! Progress and log notifications of one call, forwarded from its [`CallSignals`] to the client
//! at a bounded rate: at most one progress notification per [`PROGRESS_INTERVAL`] (only when it
//! changed), the call's warnings (at most [`crate::signals::MAX_WARNINGS`]) as `notifications/message`
//! at level `warning`, and a last flush before the result goes out. A task runs only for a call
//! that asked for progress; otherwise warnings, if any, are sent once before the result — the
//! common call pays nothing, and a stateless reply without notifications stays one JSON body.
#![allow(deprecated)] // MCP logging (SEP-2577 deprecates it; clients still use it)

use std::time::Duration;

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::signals::{CallSignals, Progress};

/// The shortest time between two progress notifications of one call.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// The logger name on Bulkhead's log notifications.
pub const LOGGER: &str = "bulkhead";

/// The level below which nothing is sent when the client set none.
pub const DEFAULT_LEVEL: LoggingLevel = LoggingLevel::Warning;

/// Whether a caller whose log level is `level` gets a call's warnings (the one rule of both
/// paths, rmcp's and the direct one).
pub fn wants_warnings(level: LoggingLevel) -> bool {
    rank(level) <= rank(LoggingLevel::Warning)
}

/// The notification that carries one warning of a call of `tool` (the one payload of both
/// paths): `{tool, message}` at level `warning` from logger [`LOGGER`].
pub fn warning(tool: &str, text: String) -> LoggingMessageNotificationParam {
    let data = serde_json::json!({ "tool": tool, "message": text });
    LoggingMessageNotificationParam::new(LoggingLevel::Warning, data).with_logger(LOGGER)
}

/// Severity order of MCP log levels (syslog's).
pub fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// What one call forwards.
pub struct Wanted {
    /// The caller's progress token, when it asked for progress.
    pub progress: Option<ProgressToken>,
    /// Whether the caller's log level lets warnings through.
    pub warnings: bool,
}

/// The forwarding task of one call. [`finish`](Forwarder::finish) flushes what is left before
/// the result is sent; dropping it (the call was cancelled) stops it at once.
pub struct Forwarder {
    done: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// Without a task: what to flush at the end.
    last: Option<Last>,
}

struct Last {
    peer: Peer<RoleServer>,
    tool: String,
    signals: CallSignals,
    warnings: bool,
}

/// Sends the warnings recorded since the last call; `false` once the client is gone.
async fn send_warnings(peer: &Peer<RoleServer>, tool: &str, signals: &CallSignals) -> bool {
    for text in signals.take_warnings() {
        if peer
            .notify_logging_message(warning(tool, text))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

impl Forwarder {
    /// Starts forwarding `signals` of a call of `tool`.
    pub fn start(
        peer: Peer<RoleServer>,
        wanted: Wanted,
        tool: &str,
        signals: CallSignals,
    ) -> Forwarder {
        let tool = tool.to_owned();
        let Some(token) = wanted.progress.clone() else {
            return Forwarder {
                done: None,
                task: None,
                last: Some(Last {
                    peer,
                    tool,
                    signals,
                    warnings: wanted.warnings,
                }),
            };
        };
        let (done, mut finished) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut sent: Option<Progress> = None;
            let start = tokio::time::Instant::now() + PROGRESS_INTERVAL;
            let mut every = tokio::time::interval_at(start, PROGRESS_INTERVAL);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let last = tokio::select! {
                    _ = every.tick() => false,
                    _ = &mut finished => true,
                };
                if let Some(p) = signals.progress()
                    && sent != Some(p)
                {
                    sent = Some(p);
                    let mut param = ProgressNotificationParam::new(token.clone(), p.done as f64)
                        .with_message(p.message());
                    if let Some(t) = p.total {
                        param = param.with_total(t as f64);
                    }
                    if peer.notify_progress(param).await.is_err() {
                        return;
                    }
                }
                if wanted.warnings && !send_warnings(&peer, &tool, &signals).await {
                    return;
                }
                if last {
                    return;
                }
            }
        });
        Forwarder {
            done: Some(done),
            task: Some(task),
            last: None,
        }
    }

    /// Sends what is left (the last progress, pending warnings) and ends the task.
    pub async fn finish(mut self) {
        if let Some(last) = self.last.take() {
            if last.warnings {
                send_warnings(&last.peer, &last.tool, &last.signals).await;
            }
            return;
        }
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(mut task) = self.task.take() {
            // A client that stopped reading cannot hold the result back for long.
            if tokio::time::timeout(Duration::from_secs(1), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
