//! Work that may write must finish: a step after a committed write (start
//! the runner, publish, trip a token) cannot be left to a future the caller
//! may drop (a client gone, a timeout layer in front of the layer).

use std::task::Poll;

use crate::store::BoxFuture;

/// Run `work` to its end even if the returned future is dropped: it is
/// polled in place first (a store that answers at once costs nothing
/// more), and moved to a task of its own only if it has to wait.
pub(crate) async fn run_to_completion<T: Send + 'static>(mut work: BoxFuture<'static, T>) -> T {
    if let Poll::Ready(out) = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await {
        return out;
    }
    match tokio::spawn(work).await {
        Ok(out) => out,
        Err(e) => match e.try_into_panic() {
            // As if it had panicked in place.
            Ok(panic) => std::panic::resume_unwind(panic),
            // The runtime is shutting down: nobody waits for this answer.
            Err(_) => std::future::pending().await,
        },
    }
}
