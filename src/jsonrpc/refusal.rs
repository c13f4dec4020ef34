//! Refusals for who the caller is rather than for what it asks: a
//! transport with credentials answers them in its own terms (HTTP 401 or
//! 403 with `WWW-Authenticate`, see [`McpEndpoint`](crate::McpEndpoint)),
//! every other transport sends the JSON-RPC error alone.

use super::{JsonRpcError, JsonRpcResponse, RequestId};

/// Why a request was refused for its caller's identity.
///
/// The MCP authorization spec has an HTTP server answer a request without
/// valid credentials with 401 and a `WWW-Authenticate` challenge, and a
/// caller it knows but does not allow with 403. [`McpEndpoint`] does so for
/// a refusal made by its identity hook
/// ([`with_identity`](crate::McpEndpoint::with_identity)) and for a
/// response marked with [`JsonRpcResponse::refused`], such as the one of a
/// [`TaskLayer`](crate::TaskLayer) that requires an identity
/// ([`with_identity_required`](crate::TaskLayer::with_identity_required)).
///
/// [`McpEndpoint`]: crate::McpEndpoint
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdentityRefusal {
    /// No credentials where the server requires them: HTTP 401,
    /// `WWW-Authenticate: Bearer realm="mcp"`.
    Missing,
    /// Credentials that are not valid (unknown, expired, malformed, or of
    /// a scheme the server does not take): HTTP 401,
    /// `WWW-Authenticate: Bearer realm="mcp", error="invalid_token"`.
    Invalid,
    /// A caller known but not allowed: HTTP 403,
    /// `WWW-Authenticate: Bearer realm="mcp", error="insufficient_scope"`.
    Forbidden,
}

impl IdentityRefusal {
    /// The JSON-RPC error that goes with the refusal: `-32600` and a
    /// message saying which refusal it is.
    pub fn error(self) -> JsonRpcError {
        JsonRpcError::invalid_request(match self {
            IdentityRefusal::Missing => "the request needs credentials",
            IdentityRefusal::Invalid => "the request's credentials are not valid",
            IdentityRefusal::Forbidden => "the caller is not allowed to make this request",
        })
    }
}

impl JsonRpcResponse {
    /// An error response refusing the request for its caller's identity:
    /// `error` on the wire, and over HTTP the status and challenge of
    /// `refusal` (see [`IdentityRefusal`]).
    ///
    /// ```
    /// use mcp_task_layer::{IdentityRefusal, JsonRpcResponse, RequestId};
    ///
    /// let refusal = IdentityRefusal::Forbidden;
    /// let resp = JsonRpcResponse::refused(Some(RequestId::from(7)), refusal, refusal.error());
    /// assert_eq!(resp.identity_refusal(), Some(IdentityRefusal::Forbidden));
    /// assert_eq!(resp.error_value().unwrap().code, -32600);
    /// ```
    pub fn refused(id: Option<RequestId>, refusal: IdentityRefusal, error: JsonRpcError) -> Self {
        let mut response = JsonRpcResponse::error(id, error);
        response.refusal = Some(refusal);
        response
    }

    /// Whether, and why, this response refuses its caller's identity (see
    /// [`refused`](Self::refused)); `None` for every other response, and for
    /// one read back from the wire.
    pub fn identity_refusal(&self) -> Option<IdentityRefusal> {
        self.refusal
    }
}
