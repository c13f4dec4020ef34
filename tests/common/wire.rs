//! Raw HTTP for the endpoint tests: one request per fresh connection
//! through hyper's client, with any method, headers and body.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use mcp_task_layer::TaskOwner;
use serde_json::Value;
use tokio::net::TcpStream;

/// Demo identity: `Authorization: Bearer <name>` makes `<name>` the owner.
pub fn bearer(parts: &Parts, extensions: &mut Extensions) {
    let token = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = token {
        extensions.insert(TaskOwner::new(token));
    }
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON, after checking it is JSON.
    pub fn json(&self) -> Value {
        assert_eq!(self.content_type.as_deref(), Some("application/json"));
        serde_json::from_slice(&self.body).unwrap()
    }

    /// The JSON-RPC error, after checking the envelope.
    pub fn error(&self) -> Value {
        let v = self.json();
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(v.get("result").is_none(), "{v}");
        v["error"].clone()
    }
}

/// A body sent in chunks, without a `Content-Length`.
pub struct Chunked(pub Vec<Bytes>);

impl hyper::body::Body for Chunked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop().map(|b| Ok(Frame::data(b))))
    }
}

/// One request to `/mcp` on a fresh connection (a refused request may make
/// the server close it).
pub async fn send<B, V>(addr: SocketAddr, method: Method, headers: &[(String, V)], body: B) -> Reply
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    V: AsRef<[u8]>,
{
    send_to(addr, method, "/mcp", headers, body).await
}

/// One request to `path` on a fresh connection.
pub async fn send_to<B, V>(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(String, V)],
    body: B,
) -> Reply
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    V: AsRef<[u8]>,
{
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.to_string());
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_ref());
    }
    let response = sender
        .send_request(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned());
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        content_type,
        headers,
        body,
    }
}
