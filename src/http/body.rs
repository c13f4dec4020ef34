//! Reading a request body within the endpoint's limit, and draining one
//! that is refused.

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::EXPECT;
use axum::http::request::Parts;
use axum::http::Version;
use bytes::BytesMut;

/// How much of a refused body the endpoint reads in all, as a multiple of
/// the body limit (and at least [`MIN_DRAIN`]), before it answers.
pub(super) const DRAIN_FACTOR: usize = 4;
/// The least a refused body is drained to, for small limits.
const MIN_DRAIN: usize = 64 * 1024;
/// How long the endpoint reads a refused body at most.
pub(super) const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Why a body was not read.
pub(super) enum BodyError {
    TooLarge,
    Unreadable,
}

/// Read the whole body, stopping as soon as it is known to exceed `limit`;
/// a body over the limit is then drained (see [`drain`]).
/// `declared` is the request's `Content-Length`, if it is a number.
pub(super) async fn read_body(
    parts: &Parts,
    declared: Option<u64>,
    body: Body,
    limit: usize,
) -> Result<Bytes, BodyError> {
    if declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX)) {
        drain(parts, declared, body, limit).await;
        return Err(BodyError::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    // A body that comes in one frame (most do) is kept as it came; a copy
    // is made only when a second frame arrives.
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    while let Some(frame) = next_frame(body.as_mut()).await {
        let Ok(frame) = frame else {
            return Err(BodyError::Unreadable);
        };
        if let Ok(data) = frame.into_data() {
            let read = first.as_ref().map_or(0, Bytes::len) + buf.len();
            if data.len() > limit - read {
                drop((first, buf));
                drain_pinned(parts, declared, body, limit, read + data.len()).await;
                return Err(BodyError::TooLarge);
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
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
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
pub(super) async fn drain(parts: &Parts, declared: Option<u64>, body: Body, limit: usize) {
    drain_pinned(parts, declared, std::pin::pin!(body), limit, 0).await;
}

async fn drain_pinned(
    parts: &Parts,
    declared: Option<u64>,
    mut body: Pin<&mut Body>,
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

async fn next_frame(
    mut body: Pin<&mut Body>,
) -> Option<Result<http_body::Frame<Bytes>, axum::Error>> {
    std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await
}
