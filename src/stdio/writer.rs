//! The one writer of the output: whole messages, one per line, in the
//! order they were queued, flushed whenever the queue runs dry.

use std::io;

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Write every message of `queue` (compact JSON, no line break inside) as
/// one line, until `stop` fires and the queue is drained, or until the
/// output fails; `broken` fires then.
pub(super) async fn write_lines<W: AsyncWrite + Unpin>(
    output: W,
    mut queue: mpsc::Receiver<Vec<u8>>,
    stop: CancellationToken,
    broken: CancellationToken,
) -> io::Result<()> {
    // Buffered: a burst of messages is one write (tokio's stdout writes on a
    // blocking thread, so each write is a round trip there).
    let mut output = BufWriter::with_capacity(64 * 1024, output);
    let outcome = async {
        // Made once, not registered with the token anew each message.
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        loop {
            let message = tokio::select! {
                biased;
                message = queue.recv() => message,
                () = &mut stopped => None,
            };
            let Some(message) = message else { break };
            write_one(&mut output, &message).await?;
            while let Ok(message) = queue.try_recv() {
                write_one(&mut output, &message).await?;
            }
            output.flush().await?;
        }
        // Stopping: what was queued before still goes out.
        queue.close();
        while let Ok(message) = queue.try_recv() {
            write_one(&mut output, &message).await?;
        }
        output.flush().await
    }
    .await;
    if outcome.is_err() {
        broken.cancel();
    }
    outcome
}

async fn write_one<W: AsyncWrite + Unpin>(output: &mut W, message: &[u8]) -> io::Result<()> {
    output.write_all(message).await?;
    output.write_all(b"\n").await
}
