//! What the dashboard answers with: a page, or a [`Refusal`] (a status and
//! one precise sentence), and the headers every answer carries.

use axum::http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A request the dashboard does not serve, and why.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::BAD_REQUEST, message)
    }

    /// The store failed (502: the dashboard is up, what it reads is not).
    pub(crate) fn store(e: &crate::store::Error) -> Self {
        Refusal::new(
            StatusCode::BAD_GATEWAY,
            format!("the task store failed: {e}"),
        )
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut body = self.message;
        body.push('\n');
        (
            self.status,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response()
    }
}

/// An HTML page.
pub(crate) fn html(status: StatusCode, body: String) -> Response {
    (status, [(CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// The dashboard's pages run its own script and stylesheet only, are
/// never framed, never cached and never sniffed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Add the headers every answer carries.
pub(crate) fn harden(response: &mut Response) {
    let headers = response.headers_mut();
    let set = |headers: &mut axum::http::HeaderMap, name: HeaderName, value: &'static str| {
        headers
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    };
    set(headers, CONTENT_SECURITY_POLICY, CSP);
    set(headers, X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, X_FRAME_OPTIONS, "DENY");
    set(headers, REFERRER_POLICY, "same-origin");
    set(headers, CACHE_CONTROL, "no-store");
}
