//! `McpEndpoint` over real HTTP: a server on 127.0.0.1:0, driven by a hyper
//! client.
#![cfg(feature = "axum")]

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

#[tokio::test]
async fn mismatched_headers_get_400_and_32020_with_the_request_id() {
    let server = start().await;
    let call = modern(11, "tools/call", json!({"name": "echo"}), false);
    let good = routing_headers(&call);

    let cases = [
        with_header(good.clone(), "mcp-method", "tasks/get"),
        with_header(good.clone(), "mcp-method", "TOOLS/CALL"),
        with_header(good.clone(), "mcp-name", "other"),
        with_header(good.clone(), "mcp-protocol-version", "2025-11-25"),
        without_header(good.clone(), "mcp-method"),
        without_header(good.clone(), "mcp-name"),
        without_header(good.clone(), "mcp-protocol-version"),
        with_header(good.clone(), "mcp-name", "=?base64?not base64?="),
    ];
    for headers in &cases {
        let reply = post(server.addr, headers, call.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{headers:?}");
        let v = reply.json();
        assert_eq!(v["id"], 11, "{headers:?}");
        assert_eq!(v["error"]["code"], -32020, "{headers:?}");
    }
    // Repeated headers are ambiguous, so they are rejected too.
    let mut repeated = good.clone();
    repeated.push(("mcp-method".to_owned(), "tools/call".to_owned()));
    let reply = post(server.addr, &repeated, call.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error()["code"], -32020);

    assert!(
        server.seen.methods().is_empty(),
        "nothing reached the service"
    );

    // The same request with matching headers is served.
    let reply = post(server.addr, &good, call.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["content"][0]["text"], "echo");
}

#[tokio::test]
async fn tasks_get_without_mcp_name_is_rejected() {
    let server = start().await;
    let get = modern(3, "tasks/get", json!({"taskId": "abc"}), true);
    let headers = without_header(routing_headers(&get), "mcp-name");
    let reply = post(server.addr, &headers, get.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let v = reply.json();
    assert_eq!(v["id"], 3);
    assert_eq!(v["error"]["code"], -32020);
    assert_eq!(
        v["error"]["message"],
        "Header mismatch: the Mcp-Name header is missing"
    );

    // An Mcp-Name naming another task is a mismatch as well.
    let headers = with_header(routing_headers(&get), "mcp-name", "xyz");
    let reply = post(server.addr, &headers, get.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error()["code"], -32020);
}

#[tokio::test]
async fn header_values_are_trimmed_and_base64_decoded() {
    let server = start().await;
    let call = modern(4, "tools/call", json!({"name": "echo"}), false);
    for name in ["  echo\t", "=?base64?ZWNobw==?=", "=?base64?ZWNobw?="] {
        let headers = with_header(routing_headers(&call), "Mcp-Name", name);
        let reply = post(server.addr, &headers, call.to_string()).await;
        assert_eq!(reply.status, StatusCode::OK, "{name:?}: {reply:?}");
        assert_eq!(reply.json()["result"]["content"][0]["text"], "echo");
    }
}

#[tokio::test]
async fn oversized_bodies_get_413_with_an_exact_error() {
    let server = start_with(Some(64)).await;
    let expected = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32600,
            "message": "Invalid request: the request body exceeds the limit of 64 bytes"
        }
    });

    // Declared too large by Content-Length.
    let reply = post(server.addr, &[], vec![b' '; 65]).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(reply.json(), expected);

    // Chunked, so only counting tells.
    let chunks = Chunked(vec![Bytes::from(vec![b' '; 40]); 3]);
    let reply = send(
        server.addr,
        Method::POST,
        &[("content-type".to_owned(), "application/json")],
        chunks,
    )
    .await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(reply.json(), expected);

    // Exactly at the limit is fine.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"custom/echo"}"#;
    let padded = format!("{body:<64}");
    assert_eq!(padded.len(), 64);
    let reply = post(server.addr, &[], padded).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["id"], 1);
    assert_eq!(server.seen.methods(), ["custom/echo"]);
}

#[tokio::test]
async fn malformed_json_is_a_400_parse_error_with_a_null_id() {
    let server = start().await;
    for body in [&b"{\"jsonrpc\":"[..], b"", b"{'id': 1}", b"\xff\xfe"] {
        let reply = post(server.addr, &[], body.to_vec()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let v = reply.json();
        assert_eq!(v.get("id"), Some(&Value::Null), "id is present and null");
        assert_eq!(v["error"]["code"], -32700);
    }
    assert!(server.seen.methods().is_empty());
}

#[tokio::test]
async fn bodies_that_are_not_one_request_object_are_invalid_requests() {
    let server = start().await;
    let unreadable_id = [
        json!([]),
        json!([{"jsonrpc": "2.0", "id": 1, "method": "custom/echo"}]),
        json!("tools/list"),
        json!(42),
        json!(null),
        json!({"jsonrpc": "2.0", "method": 7}),
        json!({"jsonrpc": "2.0", "id": 1.5, "method": "custom/echo"}),
        json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "custom/echo"}),
    ];
    for body in unreadable_id {
        let reply = post(server.addr, &[], body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let v = reply.json();
        assert_eq!(v.get("id"), Some(&Value::Null), "{body}");
        assert_eq!(v["error"]["code"], -32600, "{body}");
    }
    // When the id can be read, the error carries it.
    for (body, id) in [
        (json!({"jsonrpc": "2.0", "id": 5}), json!(5)),
        (
            json!({"jsonrpc": "1.0", "id": "a", "method": "custom/echo"}),
            json!("a"),
        ),
        (
            json!({"jsonrpc": "2.0", "id": 6, "method": "custom/echo", "params": [1]}),
            json!(6),
        ),
    ] {
        let reply = post(server.addr, &[], body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let v = reply.json();
        assert_eq!(v["id"], id, "{body}");
        assert_eq!(v["error"]["code"], -32600, "{body}");
    }
    assert!(server.seen.methods().is_empty());
}

#[tokio::test]
async fn hostile_input_gets_an_error_and_the_server_keeps_serving() {
    let server = start().await;
    let deep = "[".repeat(100_000);
    let bodies: Vec<Vec<u8>> = vec![
        deep.into_bytes(),
        br#"{"jsonrpc":"2.0","id":99999999999999999999999,"method":"x"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"taskId":5}}"#.to_vec(),
        vec![0; 1000],
    ];
    for body in bodies {
        let reply = post(server.addr, &[], body).await;
        assert!(reply.status.is_client_error() || reply.status == StatusCode::OK);
        let v = reply.json();
        assert!(v["error"]["code"].is_i64(), "{v}");
    }
    let ok = modern(1, "custom/echo", json!({}), false);
    assert_eq!(rpc(&server, &ok, None).await.status, StatusCode::OK);
}

#[tokio::test]
async fn unknown_methods_pass_through_to_the_inner_service() {
    let server = start().await;
    let body = modern(8, "custom/echo", json!({"x": 1}), false);
    let reply = rpc(&server, &body, None).await;
    assert_eq!(reply.status, StatusCode::OK);
    let v = reply.json();
    assert_eq!(v["id"], 8);
    assert_eq!(v["result"]["params"]["x"], 1);
    assert_eq!(server.seen.methods(), ["custom/echo"]);

    // The inner service's -32601 is a 404 on the 2026-07-28 wire...
    let body = modern(9, "nothing/here", json!({}), false);
    let reply = rpc(&server, &body, None).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.json()["id"], 9);
    assert_eq!(reply.error()["code"], -32601);

    // ...and an ordinary 200 before it.
    let legacy = json!({"jsonrpc": "2.0", "id": "l", "method": "nothing/here"});
    let reply = post(server.addr, &[], legacy.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["id"], "l");
    assert_eq!(reply.error()["code"], -32601);
    assert_eq!(
        server.seen.methods(),
        ["custom/echo", "nothing/here", "nothing/here"]
    );
}

#[tokio::test]
async fn notifications_get_202_and_reach_the_inner_service() {
    let server = start().await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let reply = post(server.addr, &[], note.to_string()).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    assert!(reply.body.is_empty());
    assert_eq!(server.seen.methods(), ["notifications/initialized"]);

    // A 2026-07-28 notification with mismatched headers is refused, with an
    // error that has no id at all.
    let mut note = modern(0, "notifications/cancelled", json!({}), false);
    note.as_object_mut().unwrap().remove("id");
    let headers = with_header(routing_headers(&note), "mcp-method", "tools/call");
    let reply = post(server.addr, &headers, note.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let v = reply.json();
    assert!(v.get("id").is_none(), "{v}");
    assert_eq!(v["error"]["code"], -32020);

    let reply = rpc(&server, &note, None).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    assert_eq!(
        server.seen.methods(),
        ["notifications/initialized", "notifications/cancelled"]
    );
}

#[tokio::test]
async fn a_missing_capability_is_a_400() {
    let server = start().await;
    let call = modern(12, "tools/call", json!({"name": "wait"}), false);
    let reply = rpc(&server, &call, None).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let v = reply.json();
    assert_eq!(v["id"], 12);
    assert_eq!(v["error"]["code"], -32021);
    assert!(v["error"]["data"]["requiredCapabilities"]["extensions"][TASKS].is_object());
}

#[tokio::test]
async fn only_post_is_served() {
    let server = start().await;
    for method in [Method::GET, Method::DELETE, Method::PUT] {
        let reply = send(
            server.addr,
            method.clone(),
            &[] as &[(String, String)],
            Full::new(Bytes::new()),
        )
        .await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
}

#[tokio::test]
async fn tasks_are_isolated_by_the_bearer_identity() {
    let server = start().await;
    let create = modern(1, "tools/call", json!({"name": "wait"}), true);
    let reply = rpc(&server, &create, Some("alice")).await;
    assert_eq!(reply.status, StatusCode::OK);
    let created = reply.json()["result"].clone();
    assert_eq!(created["resultType"], "task");
    let task_id = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        server.seen.owners_of("tools/call"),
        [Some("alice".to_owned())],
        "the identity hook reached the inner service"
    );

    let get = |id: i64, task: &str| modern(id, "tasks/get", json!({"taskId": task}), true);
    let reply = rpc(&server, &get(2, &task_id), Some("alice")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["taskId"], task_id.as_str());

    // For anyone else the task reads exactly like one that does not exist.
    let unknown = rpc(&server, &get(3, "no-such-task"), Some("bob")).await;
    assert_eq!(unknown.status, StatusCode::OK);
    let unknown_error = unknown.error();
    assert_eq!(unknown_error["code"], -32602);
    for caller in [Some("bob"), None] {
        let reply = rpc(&server, &get(4, &task_id), caller).await;
        assert_eq!(reply.status, unknown.status);
        assert_eq!(reply.json()["id"], 4);
        assert_eq!(reply.error(), unknown_error, "{caller:?}");

        let cancel = modern(5, "tasks/cancel", json!({"taskId": task_id}), true);
        let reply = rpc(&server, &cancel, caller).await;
        assert_eq!(reply.error(), unknown_error, "{caller:?}");

        let update = modern(
            6,
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": {}}),
            true,
        );
        let reply = rpc(&server, &update, caller).await;
        assert_eq!(reply.error(), unknown_error, "{caller:?}");
    }

    // Bob's cancel did nothing; Alice's works at once.
    let reply = rpc(&server, &get(7, &task_id), Some("alice")).await;
    assert_eq!(reply.json()["result"]["status"], "working");
    let cancel = modern(8, "tasks/cancel", json!({"taskId": task_id}), true);
    let reply = rpc(&server, &cancel, Some("alice")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"], json!({"resultType": "complete"}));
    let reply = rpc(&server, &get(9, &task_id), Some("alice")).await;
    assert_eq!(reply.json()["result"]["status"], "cancelled");
}

// ----- server→client messages over SSE (the `Peer` in the extensions) -----

/// What a background request of the `talker` service ended with.
type Outcome = Result<Value, JsonRpcError>;

/// An inner service that talks back to the client through the [`Peer`] the
/// endpoint put in the extensions.
async fn talker(
    probe: mpsc::UnboundedSender<Outcome>,
    req: JsonRpcRequest,
) -> Result<JsonRpcResponse, Infallible> {
    let peer = req.extensions.get::<Peer>().cloned();
    let outcome = match (req.method.as_str(), peer) {
        ("has_peer" | "tasks/get", peer) => Ok(json!({"peer": peer.is_some()})),
        ("ask", Some(peer)) => {
            peer.notify("notifications/progress".into(), json!({"progress": 1}))
                .await;
            let answer = peer
                .request("elicitation/create".into(), json!({"message": "Sure?"}))
                .await;
            Ok(match answer {
                Ok(result) => json!({"answer": result}),
                Err(error) => json!({"refused": error}),
            })
        }
        ("notify_then_fail", Some(peer)) => {
            peer.notify("notifications/message".into(), json!({"data": "bye"}))
                .await;
            Err(JsonRpcError::invalid_params("no luck"))
        }
        // Answers at once; a background task asks the client later.
        ("ask_later", Some(peer)) => {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                peer.notify("notifications/message".into(), json!({})).await;
                let outcome = peer.request("ping".into(), Value::Null).await;
                let _ = probe.send(outcome);
            });
            Ok(json!({}))
        }
        // Asks in the background and never answers itself.
        ("ask_and_hang", Some(peer)) => {
            tokio::spawn(async move {
                let outcome = peer.request("ping".into(), Value::Null).await;
                let _ = probe.send(outcome);
            });
            std::future::pending::<()>().await;
            unreachable!()
        }
        (method, _) => Err(JsonRpcError::method_not_found(method)),
    };
    Ok(match outcome {
        Ok(v) => JsonRpcResponse::result(req.id, v),
        Err(e) => JsonRpcResponse::error(req.id, e),
    })
}

struct Talker {
    addr: SocketAddr,
    probe: mpsc::UnboundedReceiver<Outcome>,
}

async fn start_talker() -> Talker {
    let (probe_tx, probe) = mpsc::unbounded_channel();
    let app =
        McpEndpoint::new(service_fn(move |req| talker(probe_tx.clone(), req))).into_router("/mcp");
    let addr = serve_locally(app).await;
    Talker { addr, probe }
}

/// Serve `app` on a free local port.
async fn serve_locally(app: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

fn accepting(accept: &str) -> Vec<(String, String)> {
    vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), accept.to_owned()),
    ]
}

/// An SSE response being read event by event.
struct Events {
    status: StatusCode,
    content_type: Option<String>,
    body: hyper::body::Incoming,
    buf: String,
    connection: tokio::task::JoinHandle<()>,
}

impl Events {
    /// The next `message` event's JSON, or `None` at the end of the stream.
    async fn next(&mut self) -> Option<Value> {
        let next = async {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let event: String = self.buf.drain(..end + 2).collect();
                    let mut kind = None;
                    let mut data = None;
                    for line in event.lines() {
                        if let Some(k) = line.strip_prefix("event: ") {
                            kind = Some(k.to_owned());
                        } else if let Some(d) = line.strip_prefix("data: ") {
                            assert!(data.is_none(), "one data line per event: {event:?}");
                            data = Some(d.to_owned());
                        }
                    }
                    assert_eq!(kind.as_deref(), Some("message"), "{event:?}");
                    return Some(serde_json::from_str(&data.unwrap()).unwrap());
                }
                let frame = self.body.frame().await?.unwrap();
                if let Ok(data) = frame.into_data() {
                    self.buf.push_str(std::str::from_utf8(&data).unwrap());
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), next)
            .await
            .expect("an event within 10 s")
    }
}

/// A request sent on a connection of its own: its response on the way,
/// and the connection's task (abort both to hang up).
struct Sent {
    response: tokio::task::JoinHandle<hyper::Result<hyper::Response<hyper::body::Incoming>>>,
    connection: tokio::task::JoinHandle<()>,
}

/// POST `body` on a new connection.
async fn send_on_new_connection(
    addr: SocketAddr,
    headers: &[(String, String)],
    body: &Value,
) -> Sent {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let connection = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut request = Request::post("/mcp").header(HOST, addr.to_string());
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = tokio::spawn(async move { sender.send_request(request).await });
    Sent {
        response,
        connection,
    }
}

/// POST `body` and return the response before its body is read.
async fn open(addr: SocketAddr, headers: &[(String, String)], body: &Value) -> Events {
    let Sent {
        response,
        connection,
    } = send_on_new_connection(addr, headers, body).await;
    let response = response.await.unwrap().unwrap();
    Events {
        status: response.status(),
        content_type: response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned()),
        body: response.into_body(),
        buf: String::new(),
        connection,
    }
}

fn request(id: i64, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
}

#[tokio::test]
async fn a_peer_request_streams_over_sse_and_the_answer_comes_in_a_second_post() {
    let server = start_talker().await;
    let mut events = open(server.addr, &accepting(ACCEPT_BOTH), &request(1, "ask")).await;
    assert_eq!(events.status, StatusCode::OK);
    assert_eq!(events.content_type.as_deref(), Some("text/event-stream"));

    // The notification, then the request, in the order they were sent.
    let note = events.next().await.unwrap();
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    );
    let ask = events.next().await.unwrap();
    assert_eq!(ask["jsonrpc"], "2.0");
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"], json!({"message": "Sure?"}));
    let ask_id = ask["id"].as_str().expect("a string id").to_owned();
    assert!(ask_id.starts_with("srv-") && ask_id.len() == 36, "{ask_id}");

    // The client answers with a second POST: 202, empty.
    let answer = json!({"jsonrpc": "2.0", "id": ask_id, "result": {"action": "accept", "content": {"ok": true}}});
    let reply = post(server.addr, &accepting(ACCEPT_BOTH), answer.to_string()).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    assert!(reply.body.is_empty());

    // The final response on the stream, with the request's id, then the end.
    let last = events.next().await.unwrap();
    assert_eq!(
        last,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"answer": {"action": "accept", "content": {"ok": true}}}})
    );
    assert_eq!(events.next().await, None);

    // The same answer again finds nobody waiting.
    let reply = post(server.addr, &accepting(ACCEPT_BOTH), answer.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let v = reply.json();
    assert!(v.get("id").is_none(), "{v}");
    assert_eq!(v["error"]["code"], -32600);
}

#[tokio::test]
async fn an_error_answer_reaches_the_waiting_request() {
    let server = start_talker().await;
    let mut events = open(
        server.addr,
        &accepting("text/event-stream"),
        &request(2, "ask"),
    )
    .await;
    assert_eq!(
        events.next().await.unwrap()["method"],
        "notifications/progress"
    );
    let ask = events.next().await.unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": "user declined"}});
    let reply = post(server.addr, &[], answer.to_string()).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let last = events.next().await.unwrap();
    assert_eq!(last["id"], 2);
    assert_eq!(
        last["result"]["refused"],
        json!({"code": -1, "message": "user declined"})
    );
    assert_eq!(events.next().await, None);
}

#[tokio::test]
async fn the_peer_is_offered_only_to_requests_that_accept_an_event_stream() {
    let server = start_talker().await;
    for (accept, peer) in [
        (ACCEPT_BOTH, true),
        ("text/event-stream;q=0.5", true),
        ("Text/Event-Stream", true),
        ("application/json", false),
        ("*/*", false),
    ] {
        let reply = post(
            server.addr,
            &accepting(accept),
            request(3, "has_peer").to_string(),
        )
        .await;
        // A service that never uses the peer still answers plain JSON.
        assert_eq!(reply.status, StatusCode::OK, "{accept}");
        assert_eq!(reply.json()["result"]["peer"], peer, "{accept}");
    }
    let reply = post(server.addr, &[], request(4, "has_peer").to_string()).await;
    assert_eq!(reply.json()["result"]["peer"], false);
    // `tasks/get` carries no server→client messages: never a peer.
    let reply = post(
        server.addr,
        &accepting(ACCEPT_BOTH),
        request(4, "tasks/get").to_string(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["peer"], false);
}

#[tokio::test]
async fn messages_sent_before_the_answer_come_first_and_errors_stay_on_the_stream() {
    let server = start_talker().await;
    let mut events = open(
        server.addr,
        &accepting(ACCEPT_BOTH),
        &request(5, "notify_then_fail"),
    )
    .await;
    assert_eq!(events.status, StatusCode::OK);
    assert_eq!(events.content_type.as_deref(), Some("text/event-stream"));
    assert_eq!(
        events.next().await.unwrap()["method"],
        "notifications/message"
    );
    let last = events.next().await.unwrap();
    assert_eq!(last["id"], 5);
    assert_eq!(last["error"]["code"], -32602);
    assert_eq!(events.next().await, None);
}

#[tokio::test]
async fn after_the_answer_requests_fail_and_notifications_are_dropped() {
    let mut server = start_talker().await;
    let reply = post(
        server.addr,
        &accepting(ACCEPT_BOTH),
        request(6, "ask_later").to_string(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"], json!({}));
    let outcome = tokio::time::timeout(Duration::from_secs(5), server.probe.recv())
        .await
        .unwrap()
        .unwrap();
    let error = outcome.unwrap_err();
    assert_eq!(error.code, -32603, "{error}");
}

/// The channel to a response stream is made when the peer first sends:
/// a peer that first sends after its client hung up must fail at once,
/// not queue into a channel nobody reads (fails without the end of the
/// peer when the response future is dropped).
#[tokio::test]
async fn a_peer_that_first_sends_after_the_client_left_fails_at_once() {
    let (peers_tx, mut peers) = mpsc::unbounded_channel();
    let service = service_fn(move |req: JsonRpcRequest| {
        let peers_tx = peers_tx.clone();
        async move {
            // Dropped with this future: tells the test the server let go.
            let (gone, watch) = tokio::sync::oneshot::channel::<()>();
            let _ = peers_tx.send((req.extensions.get::<Peer>().cloned().unwrap(), watch));
            let _gone = gone;
            std::future::pending::<Result<JsonRpcResponse, Infallible>>().await
        }
    });
    let addr = serve_locally(McpEndpoint::new(service).into_router("/mcp")).await;
    let sent = send_on_new_connection(addr, &accepting(ACCEPT_BOTH), &request(8, "wait")).await;
    let (peer, watch) = tokio::time::timeout(Duration::from_secs(5), peers.recv())
        .await
        .unwrap()
        .unwrap();
    // Hang up before the peer has sent anything; the server drops the call.
    sent.response.abort();
    sent.connection.abort();
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("the server drops the call of a client that left")
        .unwrap_err();

    let outcome = tokio::time::timeout(
        Duration::from_secs(5),
        peer.request("ping".into(), Value::Null),
    )
    .await
    .expect("a request to a client that left ends");
    assert_eq!(outcome.unwrap_err().code, -32603);
    tokio::time::timeout(Duration::from_secs(5), peer.closed())
        .await
        .expect("the peer reports its stream closed");
    peer.notify("notifications/message".into(), json!({})).await;
}

#[tokio::test]
async fn a_client_that_goes_away_fails_the_pending_request() {
    let mut server = start_talker().await;
    let mut events = open(
        server.addr,
        &accepting(ACCEPT_BOTH),
        &request(7, "ask_and_hang"),
    )
    .await;
    let ask = events.next().await.unwrap();
    assert_eq!(ask["method"], "ping");
    assert!(ask.get("params").is_none(), "{ask}");
    // Hang up.
    events.connection.abort();
    drop(events);
    let outcome = tokio::time::timeout(Duration::from_secs(5), server.probe.recv())
        .await
        .expect("the pending request ends when its stream does")
        .unwrap();
    assert_eq!(outcome.unwrap_err().code, -32603);
    // Its id is forgotten.
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {}});
    let reply = post(server.addr, &[], answer.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error()["code"], -32600);
}

#[tokio::test]
async fn answers_to_nobody_and_malformed_answers_get_400() {
    let server = start_talker().await;
    for body in [
        json!({"jsonrpc": "2.0", "id": "srv-00000000000000000000000000000000", "result": {}}),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "x"}}),
        json!({"jsonrpc": "2.0", "id": "a", "error": {"code": "x"}}),
        json!({"jsonrpc": "2.0", "id": "a", "result": {}, "error": {"code": 1, "message": "x"}}),
        json!({"jsonrpc": "1.0", "id": "a", "result": {}}),
        json!({"id": 1.5, "result": {}}),
    ] {
        let reply = post(server.addr, &[], body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let v = reply.json();
        assert!(v.get("id").is_none(), "{body}: {v}");
        assert_eq!(v["error"]["code"], -32600, "{body}");
    }
    // The endpoint still serves requests.
    let reply = post(server.addr, &[], request(8, "has_peer").to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
}

/// The 2025-11-25 flow end to end through `TaskLayer`: the input request of
/// a task reaches the client on the SSE stream of `tasks/result`, the answer
/// comes back in a second POST, and the result ends the stream.
#[tokio::test]
async fn legacy_tasks_result_asks_the_client_over_sse() {
    let server = start().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "confirm", "arguments": {}, "task": {"ttl": 60000}}});
    let reply = post(server.addr, &accepting(ACCEPT_BOTH), call.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
    let task = reply.json()["result"]["task"].clone();
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task["status"], "working");

    let result =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}});
    let mut events = open(server.addr, &accepting(ACCEPT_BOTH), &result).await;
    assert_eq!(events.status, StatusCode::OK);
    assert_eq!(events.content_type.as_deref(), Some("text/event-stream"));
    let mut asked = None;
    while let Some(message) = events.next().await {
        if message["method"] == "elicitation/create" {
            assert_eq!(
                message["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                task_id.as_str()
            );
            assert_eq!(message["params"]["message"], "OK?");
            asked = Some(message);
            break;
        }
        assert_eq!(message["method"], "notifications/tasks/status", "{message}");
    }
    let asked = asked.expect("the input request came on the stream");
    let answer =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}});
    let reply = post(server.addr, &[], answer.to_string()).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);

    let mut last = None;
    while let Some(message) = events.next().await {
        last = Some(message);
    }
    let last = last.expect("the response ends the stream");
    assert_eq!(last["id"], 2);
    assert_eq!(
        last["result"]["content"][0]["text"],
        r#"answered {"action":"accept","content":{}}"#
    );
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
}

/// `into_service` answers as `into_router` does, without a router: `POST`
/// on its path is the endpoint, other methods there get 405 with
/// `Allow: POST`, other paths 404.
#[tokio::test]
async fn the_service_without_a_router_answers_as_the_router_does() {
    use tower::ServiceExt;

    let echo = service_fn(|req: JsonRpcRequest| async move {
        Ok::<_, Infallible>(JsonRpcResponse::result(
            req.id,
            json!({"method": req.method}),
        ))
    });
    let service = McpEndpoint::new(echo).into_service("/mcp");
    let body = modern(3, "custom/echo", json!({}), false);
    let request = |method: Method, path: &str| {
        // The routing headers include `Content-Type`.
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in routing_headers(&body) {
            builder = builder.header(name, value);
        }
        builder
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()
    };

    let ok = service
        .clone()
        .oneshot(request(Method::POST, "/mcp"))
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let bytes = ok.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["method"], "custom/echo");

    let get = service
        .clone()
        .oneshot(request(Method::GET, "/mcp"))
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.headers()["allow"], "POST");

    let elsewhere = service
        .oneshot(request(Method::POST, "/other"))
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::NOT_FOUND);
}
