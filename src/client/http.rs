//! [`HttpTransport`]: a `Service<JsonRpcRequest>` that talks Streamable HTTP
//! to a remote MCP server (feature `http-client`).

use std::collections::VecDeque;
use std::fmt;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tower_service::Service;

use super::sse::EventDecoder;
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::peer::Peer;
use crate::protocol::META_PROTOCOL_VERSION;
use crate::store::{BoxError, BoxFuture};

/// A Streamable HTTP client for one MCP endpoint URL (plain `http://`;
/// put TLS in front if you need it).
///
/// Each request is one `POST`. 2026-07-28 requests get the
/// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers from their
/// body. An answer may be JSON or an SSE stream: on a stream, server→client
/// requests are answered through the [`Peer`] in the request's extensions
/// (with a second `POST`), notifications are dropped, and the response to
/// the request ends the call. Use it under
/// [`TaskClient`](crate::client::TaskClient).
///
/// The stream is read as the SSE specification says, whatever frames its
/// bytes come in: lines end with CRLF, LF or a lone CR, an event's `data`
/// lines are joined, only `message` events (or events without a type) are
/// read as JSON-RPC messages, and an event the stream leaves incomplete
/// is not. A message larger than
/// [`with_max_message_size`](HttpTransport::with_max_message_size) is an
/// error.
#[derive(Clone)]
pub struct HttpTransport {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    authorization: Option<HeaderValue>,
    max_message: usize,
}

/// The default largest message [`HttpTransport`] reads: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("uri", &self.uri)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// A client for the endpoint at `url` (for example
    /// `http://127.0.0.1:3001/mcp`).
    pub fn new(url: &str) -> Result<Self, BoxError> {
        let uri: Uri = url.parse()?;
        if uri.scheme_str() != Some("http") {
            return Err("only http:// URLs are supported".into());
        }
        Ok(HttpTransport {
            client: Client::builder(TokioExecutor::new()).build_http(),
            uri,
            authorization: None,
            max_message: DEFAULT_MAX_MESSAGE_SIZE,
        })
    }

    /// The largest JSON answer or SSE event read, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`]): past it the call fails instead of
    /// buffering whatever the server sends.
    #[must_use]
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }

    /// Send `Authorization: Bearer <token>` with every request.
    pub fn with_bearer(mut self, token: &str) -> Result<Self, BoxError> {
        self.authorization = Some(HeaderValue::from_str(&format!("Bearer {token}"))?);
        Ok(self)
    }

    async fn post(
        &self,
        message: &Value,
        headers: &[(&'static str, String)],
    ) -> Result<hyper::Response<hyper::body::Incoming>, BoxError> {
        let mut req = Request::post(self.uri.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(auth) = &self.authorization {
            req = req.header(http::header::AUTHORIZATION, auth.clone());
        }
        for (name, value) in headers {
            req = req.header(*name, value.as_str());
        }
        let body = Full::new(Bytes::from(serde_json::to_vec(message)?));
        Ok(self.client.request(req.body(body)?).await?)
    }

    async fn exchange(self, req: JsonRpcRequest) -> Result<JsonRpcResponse, BoxError> {
        let mut headers = Vec::new();
        if let Some(version) = req
            .meta()
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
        {
            headers.push(("mcp-protocol-version", version.to_owned()));
            headers.push(("mcp-method", req.method.clone()));
            let params = req.params_object();
            let name = match req.method.as_str() {
                "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
                "resources/read" => params.and_then(|p| p.get("uri")),
                "tasks/get" | "tasks/update" | "tasks/cancel" => {
                    params.and_then(|p| p.get("taskId"))
                }
                _ => None,
            };
            if let Some(name) = name.and_then(Value::as_str) {
                headers.push(("mcp-name", name.to_owned()));
            }
        }
        let peer = req.extensions.get::<Peer>().cloned();
        let message = serde_json::to_value(&req)?;
        let resp = self.post(&message, &headers).await?;
        let status = resp.status();
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if status == http::StatusCode::ACCEPTED {
            return Ok(JsonRpcResponse::result(req.id, json!({})));
        }
        let mut body = resp.into_body();
        if !is_sse {
            let bytes = Limited::new(body, self.max_message)
                .collect()
                .await?
                .to_bytes();
            return serde_json::from_slice(&bytes)
                .map_err(|e| format!("HTTP {status}: not a JSON-RPC response: {e}").into());
        }
        // Bytes, not text, until an event is complete: a frame may end
        // inside a character or between a CR and its LF.
        let mut decoder = EventDecoder::new(self.max_message);
        let mut events: VecDeque<Vec<u8>> = VecDeque::new();
        loop {
            while let Some(data) = events.pop_front() {
                // An event without data primes a reconnecting client.
                if data.is_empty() {
                    continue;
                }
                let msg: Value = serde_json::from_slice(&data)?;
                if let Some(method) = msg.get("method").and_then(Value::as_str) {
                    if let (Some(id), Some(peer)) = (msg.get("id"), &peer) {
                        // A server→client request: answer it in a second POST.
                        let params = msg.get("params").cloned().unwrap_or(Value::Null);
                        let reply = match peer.request(method.to_owned(), params).await {
                            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
                        };
                        self.post(&reply, &[]).await?;
                    }
                    continue;
                }
                let resp: JsonRpcResponse = serde_json::from_value(msg)?;
                if resp.id == req.id {
                    return Ok(resp);
                }
            }
            match body.frame().await {
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        decoder.feed(&data, &mut events).map_err(|e| {
                            format!("an SSE event of the server is larger than {} bytes", e.0)
                        })?;
                    }
                }
                None => {
                    return Ok(JsonRpcResponse::error(
                        req.id.clone().or(Some(RequestId::Number(0))),
                        JsonRpcError::internal("the server closed the stream without answering"),
                    ))
                }
            }
        }
    }
}

impl Service<JsonRpcRequest> for HttpTransport {
    type Response = JsonRpcResponse;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<JsonRpcResponse, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: JsonRpcRequest) -> Self::Future {
        Box::pin(self.clone().exchange(req))
    }
}
