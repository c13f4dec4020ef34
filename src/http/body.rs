//! Reading a request body within the endpoint's limit, and draining one
//! that is refused.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Poll};
use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use axum::http::header::EXPECT;
use axum::http::request::Parts;
use axum::http::Version;
use bytes::BytesMut;

use crate::store::BoxFuture;

/// How much of a refused body the endpoint reads in all, as a multiple of
/// the body limit (and at least [`MIN_DRAIN`]), before it answers.
pub(super) const DRAIN_FACTOR: usize = 4;
/// The least a refused body is drained to, for small limits.
const MIN_DRAIN: usize = 64 * 1024;
/// How long the endpoint reads a refused body at most.
pub(super) const DRAIN_TIME: Duration = Duration::from_secs(5);

/// A request body the endpoint reads: axum's, or hyper's own.
pub(super) trait ReqBody: HttpBody<Data = Bytes, Error: Send> + Send + 'static {}

impl<B: HttpBody<Data = Bytes, Error: Send> + Send + 'static> ReqBody for B {}

/// Why a body was not read.
pub(super) enum BodyError {
    TooLarge,
    Unreadable,
}

/// Read the whole body, stopping as soon as it is known to exceed `limit`;
/// a body over the limit is then drained (see [`drain`]).
/// `declared` is the request's `Content-Length`, if it is a number.
///
/// An `async` block, not an `async fn` (whose arguments would be kept
/// twice), reading in one poll loop (no frame kept across an await): the
/// future is part of every request's.
///
/// Generic over the body: axum's (the endpoint behind a router or
/// [`McpService`](super::McpService)) or hyper's own (the endpoint served
/// by [`McpEndpoint::serve`](super::McpEndpoint::serve), without boxing it).
#[allow(clippy::manual_async_fn)]
pub(super) fn read_body<'p, B: ReqBody>(
    parts: &'p Parts,
    declared: Option<u64>,
    body: B,
    limit: usize,
) -> impl Future<Output = Result<Bytes, BodyError>> + Send + 'p {
    async move {
        if declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX)) {
            drain(parts, declared, body, limit).await;
            return Err(BodyError::TooLarge);
        }
        let mut body = std::pin::pin!(body);
        // A body that comes in one frame (most do) is kept as it came; a
        // copy is made only when a second frame arrives.
        let mut first: Option<Bytes> = None;
        let mut buf = BytesMut::new();
        // `Some(n)`: over the limit, `n` bytes read.
        let over = std::future::poll_fn(|cx| loop {
            let Some(frame) = ready!(body.as_mut().poll_frame(cx)) else {
                return Poll::Ready(Ok(None));
            };
            let Ok(frame) = frame else {
                return Poll::Ready(Err(BodyError::Unreadable));
            };
            if let Ok(data) = frame.into_data() {
                let read = first.as_ref().map_or(0, Bytes::len) + buf.len();
                if data.len() > limit - read {
                    return Poll::Ready(Ok(Some(read + data.len())));
                }
                if buf.is_empty() && first.is_none() {
                    first = Some(data);
                } else {
                    if let Some(first) = first.take() {
                        buf.extend_from_slice(&first);
                    }
                    buf.extend_from_slice(&data);
                }
            }
            // The body says it has no more (hyper: its `Content-Length`
            // is all read): done, without polling it once more for the end
            // (which, not yet known, would start the 408 timer).
            if body.is_end_stream() {
                return Poll::Ready(Ok(None));
            }
        })
        .await?;
        if let Some(read) = over {
            drop((first, buf));
            // Boxed: rare, and would make every request's future larger.
            Box::pin(drain_pinned(parts, declared, body, limit, read)).await;
            return Err(BodyError::TooLarge);
        }
        Ok(first.unwrap_or_else(|| buf.freeze()))
    }
}

/// Read and drop the body of a request the endpoint refuses, so that the
/// answer reaches the client.
///
/// A client that writes its whole body before it reads (Python's `urllib`,
/// many simple clients) otherwise finds the connection closed under its
/// write, or reset with unread data, and never sees the answer. Only a
/// bounded amount is read: [`DRAIN_FACTOR`] times `limit` in all, for at
/// most [`DRAIN_TIME`]; a body declared larger is not read at all. After
/// that the answer goes out and the connection closes.
///
/// Boxed: refused requests are rare, and the drain's timer would make every
/// request's future larger.
pub(super) fn drain<B: ReqBody>(
    parts: &Parts,
    declared: Option<u64>,
    body: B,
    limit: usize,
) -> BoxFuture<'_, ()> {
    Box::pin(async move { drain_pinned(parts, declared, std::pin::pin!(body), limit, 0).await })
}

async fn drain_pinned<B: ReqBody>(
    parts: &Parts,
    declared: Option<u64>,
    mut body: Pin<&mut B>,
    limit: usize,
    read: usize,
) {
    // HTTP/2 resets the stream by itself, and a client that sent
    // `Expect: 100-continue` sends no body until told to, which reading
    // would do.
    if parts.version > Version::HTTP_11 || parts.headers.contains_key(EXPECT) {
        return;
    }
    let budget = limit.saturating_mul(DRAIN_FACTOR).max(MIN_DRAIN);
    if declared.is_some_and(|n| n > u64::try_from(budget).unwrap_or(u64::MAX)) {
        return;
    }
    let mut left = budget.saturating_sub(read);
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while let Some(Ok(frame)) = next_frame(body.as_mut()).await {
            if let Ok(data) = frame.into_data() {
                match left.checked_sub(data.len()) {
                    Some(rest) => left = rest,
                    None => return,
                }
            }
        }
    })
    .await;
}

async fn next_frame<B: ReqBody>(
    mut body: Pin<&mut B>,
) -> Option<Result<http_body::Frame<Bytes>, B::Error>> {
    std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await
}
