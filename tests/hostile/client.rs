//! Requests as a conforming client writes them, and by hand.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::Method;
use http_body_util::Full;
use serde_json::{json, Value};
use tokio::net::TcpStream;

use crate::common::wire::{send, Reply};
use crate::{CAPS, PV, TASKS};

/// A request written by hand, for bodies the server refuses before reading
/// them: it answers 413 and closes, so writing the rest of the body may
/// fail (EPIPE) while the answer is already on its way. The body is written
/// beside the read, its errors ignored, and the answer is read until its
/// `Content-Length` is complete.
pub(crate) async fn send_refused(addr: SocketAddr, headers: &Headers, body: Body) -> Reply {
    use tokio::io::AsyncWriteExt;
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let mut head = request_head(addr, headers);
    let body = match body {
        Body::Full(bytes) => {
            head.extend_from_slice(format!("content-length: {}\r\n\r\n", bytes.len()).as_bytes());
            bytes
        }
        Body::Chunked(chunks) => {
            head.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            let mut out = Vec::new();
            for chunk in chunks.iter().rev() {
                out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                out.extend_from_slice(chunk);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            out
        }
    };
    let writer = tokio::spawn(async move {
        let _ = write.write_all(&head).await;
        let _ = write.write_all(&body).await;
        write
    });
    let reply = tokio::time::timeout(Duration::from_secs(30), read_reply(&mut read))
        .await
        .expect("an answer within 30 s")
        .unwrap_or_else(|e| panic!("no whole answer: {e}"));
    writer.abort();
    reply
}

/// `POST /mcp` and `headers`, each on its line; the caller adds the framing
/// headers and the blank line.
pub(crate) fn request_head(addr: SocketAddr, headers: &Headers) -> Vec<u8> {
    let mut head = format!("POST /mcp HTTP/1.1\r\nhost: {addr}\r\n").into_bytes();
    for (name, value) in headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head
}

/// One HTTP/1.1 answer with a `Content-Length`, read whole.
pub(crate) async fn read_reply<R: tokio::io::AsyncRead + Unpin>(
    read: &mut R,
) -> Result<Reply, String> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let field = |name: &str| {
                head.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
            };
            let length: usize = field("content-length:")
                .and_then(|v| v.parse().ok())
                .ok_or("no content-length")?;
            if buf.len() >= end + 4 + length {
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or("no status line")?;
                let headers = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_once(':'))
                    .filter_map(|(n, v)| {
                        Some((
                            axum::http::HeaderName::from_bytes(n.trim().as_bytes()).ok()?,
                            axum::http::HeaderValue::from_str(v.trim()).ok()?,
                        ))
                    })
                    .collect();
                return Ok(Reply {
                    status,
                    content_type: field("content-type:"),
                    headers,
                    body: Bytes::copy_from_slice(&buf[end + 4..end + 4 + length]),
                });
            }
        }
        match read.read(&mut chunk).await {
            Ok(0) => return Err(format!("the connection ended after {} bytes", buf.len())),
            Err(e) => return Err(format!("{e} after {} bytes", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

pub(crate) type Headers = Vec<(String, Vec<u8>)>;

pub(crate) fn header(headers: &mut Headers, name: &str, value: impl Into<Vec<u8>>) {
    headers.push((name.to_owned(), value.into()));
}

pub(crate) fn set_header(mut headers: Headers, name: &str, value: impl Into<Vec<u8>>) -> Headers {
    headers.retain(|(n, _)| n != name);
    header(&mut headers, name, value);
    headers
}

pub(crate) fn without(mut headers: Headers, name: &str) -> Headers {
    headers.retain(|(n, _)| n != name);
    headers
}

pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
        for _ in chunk.len()..3 {
            out.push('=');
        }
    }
    out
}

/// The headers a conforming client derives from a body (and `caller`'s
/// bearer token): what the endpoint checks, so that only what a case
/// breaks on purpose is wrong.
pub(crate) fn routing(body: &Value, caller: Option<&str>) -> Headers {
    let mut headers = Vec::new();
    header(&mut headers, "content-type", "application/json");
    if let Some(caller) = caller {
        header(&mut headers, "authorization", format!("Bearer {caller}"));
    }
    let Some(version) = body["params"]["_meta"][PV].as_str() else {
        return headers;
    };
    header(&mut headers, "mcp-protocol-version", version);
    let method = body["method"].as_str().unwrap_or_default();
    header(&mut headers, "mcp-method", method);
    let name = match method {
        "tools/call" | "prompts/get" => body["params"]["name"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => body["params"]["taskId"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic());
        let value = if plain {
            name.to_owned()
        } else {
            format!("=?base64?{}?=", base64(name.as_bytes()))
        };
        header(&mut headers, "mcp-name", value);
    }
    headers
}

pub(crate) fn meta(tasks: bool) -> Value {
    let mut caps = json!({ "elicitation": {} });
    if tasks {
        caps["extensions"] = json!({ TASKS: {} });
    }
    json!({ PV: "2026-07-28", CAPS: caps })
}

/// A 2026-07-28 request declaring the tasks extension.
pub(crate) fn modern(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(true);
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A 2025-11-25 request (no `_meta`).
pub(crate) fn legacy(id: i64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

pub(crate) fn accept_name(name: &str) -> Value {
    json!({ "action": "accept", "content": { "name": name } })
}

pub(crate) async fn rpc(addr: SocketAddr, body: &Value, caller: Option<&str>) -> Value {
    let reply = post(addr, routing(body, caller), body.to_string()).await;
    assert_eq!(reply.status.as_u16(), 200, "{body}: {reply:?}");
    serde_json::from_slice(&reply.body).unwrap()
}

pub(crate) async fn post(addr: SocketAddr, headers: Headers, body: impl Into<Bytes>) -> Reply {
    send(addr, Method::POST, &headers, Full::new(body.into())).await
}

pub(crate) enum Body {
    Full(Vec<u8>),
    Chunked(Vec<Bytes>),
}
