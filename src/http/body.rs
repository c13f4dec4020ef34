//! Reading a request body within the endpoint's limit.

use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::CONTENT_LENGTH;
use axum::http::HeaderMap;
use bytes::BytesMut;

/// Why a body was not read.
pub(super) enum BodyError {
    TooLarge,
    Unreadable,
}

/// Read the whole body, stopping as soon as it is known to exceed `limit`.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX)) {
        return Err(BodyError::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(frame) = frame else {
            return Err(BodyError::Unreadable);
        };
        if let Ok(data) = frame.into_data() {
            if data.len() > limit - buf.len() {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}
