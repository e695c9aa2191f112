//! A reader that refuses a message (one line of the stdio transport) longer than a limit, so an
//! upstream writing without end cannot grow this process's memory: the transport sees an error,
//! the upstream is treated as crashed and restarted.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// `inner`, with lines of at most `max` bytes.
pub struct Capped<R> {
    inner: R,
    max: u64,
    line: u64,
}

impl<R> Capped<R> {
    /// Wraps `inner`.
    pub fn new(inner: R, max: u64) -> Capped<R> {
        Capped {
            inner,
            max,
            line: 0,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                for &b in &buf.filled()[before..] {
                    if b == b'\n' {
                        this.line = 0;
                    } else {
                        this.line += 1;
                        if this.line > this.max {
                            return Poll::Ready(Err(io::Error::other(format!(
                                "the upstream sent a message over {} bytes",
                                this.max
                            ))));
                        }
                    }
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}
