//! The process's stdin and stdout as the transport reads and writes them.
//!
//! tokio's `Stdin` and `Stdout` do each read and write on a blocking
//! thread (a file or a terminal cannot be polled), so every message costs
//! two thread hand-offs each way. When both are pipes, as they are under an
//! MCP host, they are polled on the runtime's own thread instead
//! (`tokio::net::unix::pipe`, on a duplicate of each descriptor); anything
//! else keeps tokio's.

use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// The input half.
pub(super) type Input = Pin<Box<dyn AsyncRead + Send>>;
/// The output half.
pub(super) type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// stdin and stdout: polled pipes where both are pipes, else tokio's.
pub(super) fn std_pipes() -> (Input, Output) {
    #[cfg(unix)]
    if let Some((input, output)) = polled() {
        return (Box::pin(input), Box::pin(output));
    }
    (Box::pin(tokio::io::stdin()), Box::pin(tokio::io::stdout()))
}

/// Both halves as polled pipes, or `None` if either is not a pipe (or the
/// runtime has no I/O driver).
#[cfg(unix)]
fn polled() -> Option<(
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Sender,
)> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;

    let dup =
        |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().ok().map(std::fs::File::from);
    let input = dup(std::io::stdin().as_fd())?;
    let output = dup(std::io::stdout().as_fd())?;
    // Each checks that its descriptor is a FIFO, then makes it
    // non-blocking.
    let input = pipe::Receiver::from_file(input).ok()?;
    let output = pipe::Sender::from_file(output).ok()?;
    Some((input, output))
}
