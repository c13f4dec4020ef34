//! `McpEndpoint` over real HTTP: a server on 127.0.0.1:0, driven by a hyper
//! client.
#![cfg(feature = "axum")]

#[path = "../common/mod.rs"]
mod common;

use common::wire::{bearer, send, Chunked, Reply};

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header::{CONTENT_TYPE, HOST};
use axum::http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use mcp_task_layer::{
    CancellationToken, JsonRpcError, JsonRpcRequest, JsonRpcResponse, McpEndpoint, MemoryStore,
    Peer, TaskLayer, TaskOwner, TaskPolicy,
};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tower::{service_fn, ServiceBuilder};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A method and the owner it was called for.
type Call = (String, Option<String>);

/// Every request the inner service saw.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Call>>>);

impl Seen {
    fn methods(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }

    fn owners_of(&self, method: &str) -> Vec<Option<String>> {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|(m, _)| m == method)
            .map(|(_, o)| o.clone())
            .collect()
    }
}

/// The inner MCP server: `echo` answers at once, `wait` runs until its task
/// is cancelled, `custom/echo` echoes, everything else is unknown.
async fn inner(seen: Seen, req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let owner = req.extensions.get::<TaskOwner>().map(|o| o.0.clone());
    seen.0.lock().unwrap().push((req.method.clone(), owner));
    let tool = req
        .params_object()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let outcome = match (req.method.as_str(), tool.as_str()) {
        ("tools/call", "echo") => Ok(json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": "echo"}]
        })),
        ("tools/call", "wait") => {
            let token = req.extensions.get::<CancellationToken>().cloned();
            if let Some(token) = token {
                token.cancelled().await;
            }
            Ok(json!({"resultType": "complete", "content": []}))
        }
        // Asks for a confirmation first (MRTR), then reports the answer.
        ("tools/call", "confirm") => {
            let answer = req
                .params_object()
                .and_then(|p| p.get("inputResponses"))
                .and_then(|r| r.get("ok"))
                .cloned();
            Ok(match answer {
                Some(answer) => json!({
                    "resultType": "complete",
                    "content": [{"type": "text", "text": format!("answered {answer}")}]
                }),
                None => json!({
                    "resultType": "input_required",
                    "inputRequests": {"ok": {"method": "elicitation/create", "params": {
                        "mode": "form",
                        "message": "OK?",
                        "requestedSchema": {"type": "object", "properties": {}}
                    }}}
                }),
            })
        }
        ("tools/call", other) => Err(JsonRpcError::invalid_params(format!("no tool {other}"))),
        ("custom/echo", _) => Ok(json!({"resultType": "complete", "params": req.params})),
        (method, _) => Err(JsonRpcError::method_not_found(method)),
    };
    Ok(match outcome {
        Ok(v) => JsonRpcResponse::result(req.id, v),
        Err(e) => JsonRpcResponse::error(req.id, e),
    })
}

struct Server {
    addr: SocketAddr,
    seen: Seen,
}

async fn start_with(limit: Option<usize>) -> Server {
    let seen = Seen::default();
    let for_inner = seen.clone();
    let service = ServiceBuilder::new()
        .layer(
            TaskLayer::new(MemoryStore::new())
                .with_tool_policy("wait", TaskPolicy::Task)
                .with_tool_policy("confirm", TaskPolicy::Task),
        )
        .service(service_fn(move |req| inner(for_inner.clone(), req)));
    let mut endpoint = McpEndpoint::new(service).with_identity(bearer);
    if let Some(limit) = limit {
        endpoint = endpoint.with_body_limit(limit);
    }
    let addr = serve_locally(endpoint.into_router("/mcp")).await;
    Server { addr, seen }
}

async fn start() -> Server {
    start_with(None).await
}

/// POST `body` with `headers`, and `Content-Type: application/json` unless
/// they name another.
async fn post(addr: SocketAddr, headers: &[(String, String)], body: impl Into<Bytes>) -> Reply {
    let mut headers = headers.to_vec();
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("content-type".to_owned(), "application/json".to_owned()));
    }
    send(addr, Method::POST, &headers, Full::new(body.into())).await
}

/// A 2026-07-28 request body, declaring the tasks extension or not.
fn modern(id: i64, method: &str, params: Value, tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a conforming client derives from a body.
fn routing_headers(body: &Value) -> Vec<(String, String)> {
    let method = body["method"].as_str().unwrap();
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    let name = match method {
        "tools/call" | "prompts/get" => body["params"]["name"].as_str(),
        "resources/read" => body["params"]["uri"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => body["params"]["taskId"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        headers.push(("mcp-name".to_owned(), name.to_owned()));
    }
    headers
}

fn with_header(
    mut headers: Vec<(String, String)>,
    name: &str,
    value: &str,
) -> Vec<(String, String)> {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
    headers
}

fn without_header(mut headers: Vec<(String, String)>, name: &str) -> Vec<(String, String)> {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers
}

/// Send `body` with the headers a conforming client would, as `caller`.
async fn rpc(server: &Server, body: &Value, caller: Option<&str>) -> Reply {
    let mut headers = routing_headers(body);
    if let Some(caller) = caller {
        headers.push(("authorization".to_owned(), format!("Bearer {caller}")));
    }
    post(server.addr, &headers, body.to_string()).await
}

/// Serve `app` on a free local port.
async fn serve_locally(app: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

mod edge;
mod service;
mod sse;
