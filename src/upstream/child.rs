//! The upstream as a child process speaking newline-delimited JSON-RPC on
//! its stdin and stdout, its stderr passed through to ours.

use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::link::{InboundSink, Link};
use crate::stdio::lines::{Line, LineReader};

/// The longest line read from the upstream; a longer one is dropped.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Messages queued for the child's stdin before a sender waits.
const QUEUE: usize = 256;

/// Start `program args` and a link over its pipes. The child is killed
/// when the link closes or the gateway drops it.
pub(crate) fn spawn(
    serial: u64,
    program: &str,
    args: &[String],
    sink: Arc<dyn InboundSink>,
) -> std::io::Result<Arc<Link>> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the child has no pipes"));
    };
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
    let link = Link::new(serial, tx);
    // The writer: one message a line, until the link or the pipe ends.
    let writer_link = Arc::clone(&link);
    tokio::spawn(async move {
        // Made once: a wait made anew on each turn registers and
        // unregisters itself with the token every message.
        let closed = writer_link.closed();
        tokio::pin!(closed);
        loop {
            // The message first: the wait for the end is polled only
            // when there is none.
            let message = tokio::select! {
                biased;
                m = rx.recv() => m,
                () = &mut closed => None,
            };
            let Some(mut message) = message else { break };
            one_line(&mut message);
            message.push(b'\n');
            if stdin.write_all(&message).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });
    // The reader owns the child: at the end of its output, or when the
    // link closes, the child is killed and reaped and the link says why.
    let reader_link = Arc::clone(&link);
    tokio::spawn(async move {
        let mut lines = LineReader::new(BufReader::new(stdout), MAX_LINE);
        let closed = reader_link.closed();
        tokio::pin!(closed);
        let why = loop {
            let line = tokio::select! {
                biased;
                line = lines.next() => line,
                () = &mut closed => break "the gateway closed the connection".to_owned(),
            };
            match line {
                Ok(Line::Text(bytes)) => reader_link.deliver(&bytes, &*sink),
                Ok(Line::TooLong) => {
                    tracing::warn!("the upstream sent a line over {MAX_LINE} bytes; dropped")
                }
                Ok(Line::Eof) => break "the upstream closed its output".to_owned(),
                Err(e) => break format!("reading from the upstream failed: {e}"),
            }
        };
        let why = ended(&mut child, why).await;
        tracing::warn!(serial, "{why}");
        reader_link.close(why);
        sink.link_closed(serial);
    });
    Ok(link)
}

/// `message` (JSON) on one line: each line break becomes a space. In JSON
/// text a line break can only be whitespace between tokens (a string
/// escapes its own), so the message means the same; a client's params
/// copied as written (`\n` or `\r` between tokens) can then neither cut
/// its request short nor hide a message of its own on the next line.
fn one_line(message: &mut [u8]) {
    if memchr::memchr2(b'\n', b'\r', message).is_none() {
        return;
    }
    for byte in message {
        if matches!(byte, b'\n' | b'\r') {
            *byte = b' ';
        }
    }
}

/// Kill the child if it still runs and say how it ended.
async fn ended(child: &mut Child, why: String) -> String {
    let status = match child.try_wait() {
        Ok(Some(status)) => Some(status),
        _ => {
            // Its output ended but it may linger a moment before exiting.
            match tokio::time::timeout(std::time::Duration::from_millis(200), child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => {
                    let _ = child.kill().await;
                    None
                }
            }
        }
    };
    match status {
        Some(status) => format!("the upstream process exited ({status})"),
        None => why,
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_message_with_line_breaks_between_its_tokens_is_one_line_meaning_the_same() {
        let text = "{\"a\":\r\n[1,\n2],\"b\":\"x\\ny\"}\r";
        let mut message = text.as_bytes().to_vec();
        one_line(&mut message);
        assert!(!message.contains(&b'\n') && !message.contains(&b'\r'));
        let read: serde_json::Value = serde_json::from_slice(&message).unwrap();
        let meant: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(read, meant);
        let mut plain = b"{\"a\":1}".to_vec();
        one_line(&mut plain);
        assert_eq!(plain, b"{\"a\":1}");
    }
}
