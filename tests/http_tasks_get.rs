//! `McpEndpoint::with_direct_tasks_get`: the endpoint answers `tasks/get`
//! from the layer's store without calling the service. Its answers are
//! byte for byte the service's, errors included, for both eras, every
//! caller and every malformed request; and it is the path taken (it
//! answers while the service is not ready).
#![cfg(feature = "axum")]

use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::Extensions;
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, McpEndpoint, MemoryStore, TaskLayer, TaskOwner, TaskPolicy,
    TaskService,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::{Layer, Service};

/// The inner server: every `tools/call` completes at once. Not ready
/// while `ready` is false (and never woken: only a path that does not
/// wait for it answers then).
#[derive(Clone)]
struct Inner {
    ready: Arc<AtomicBool>,
}

impl Service<JsonRpcRequest> for Inner {
    type Response = JsonRpcResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<JsonRpcResponse, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.ready.load(Ordering::Acquire) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, req: JsonRpcRequest) -> Self::Future {
        let result =
            json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]});
        Box::pin(async move { Ok(JsonRpcResponse::result(req.id, result)) })
    }
}

fn caller(parts: &Parts, extensions: &mut Extensions) {
    if let Some(user) = parts.headers.get("x-user").and_then(|v| v.to_str().ok()) {
        extensions.insert(TaskOwner::new(user));
    }
}

struct Servers {
    /// Through the service (no direct `tasks/get`), by `serve`.
    general: SocketAddr,
    /// Direct, by `serve`.
    direct: SocketAddr,
    /// Direct, behind axum's router.
    routed: SocketAddr,
    ready: Arc<AtomicBool>,
}

async fn start() -> Servers {
    start_with(TaskLayer::new(MemoryStore::new())).await
}

async fn start_with(layer: TaskLayer) -> Servers {
    let ready = Arc::new(AtomicBool::new(true));
    let layer = layer.with_tool_policy("job", TaskPolicy::Task);
    let service: TaskService<Inner> = layer.layer(Inner {
        ready: Arc::clone(&ready),
    });
    let endpoint = || McpEndpoint::new(service.clone()).with_identity(caller);
    let bind = || async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (listener, addr)
    };
    let (listener, general) = bind().await;
    tokio::spawn(endpoint().serve(listener, "/mcp").into_future());
    let (listener, direct) = bind().await;
    let app = endpoint().with_direct_tasks_get();
    tokio::spawn(app.serve(listener, "/mcp").into_future());
    let (listener, routed) = bind().await;
    let app = endpoint().with_direct_tasks_get().into_router("/mcp");
    tokio::spawn(async move { axum::serve(listener, app).await });
    Servers {
        general,
        direct,
        routed,
        ready,
    }
}

/// One request, its connection closed after the answer: the answer's
/// status line, its headers but `date`, and its body.
async fn exchange(addr: SocketAddr, headers: &str, body: &str) -> String {
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n\
         {headers}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an answer");
    let mut lines: Vec<String> = head
        .lines()
        .filter(|l| !l.to_lowercase().starts_with("date:"))
        .map(str::to_owned)
        .collect();
    lines.push(body.to_owned());
    lines.join("\n")
}

/// The answer of each server, asserted the same; the first returned.
async fn same_answer(servers: &Servers, headers: &str, body: &str) -> String {
    let general = exchange(servers.general, headers, body).await;
    for addr in [servers.direct, servers.routed] {
        let other = exchange(addr, headers, body).await;
        assert_eq!(general, other, "{headers}{body}");
    }
    general
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

fn modern_headers(method: &str, name: &str, user: Option<&str>) -> String {
    let mut headers =
        format!("mcp-protocol-version: 2026-07-28\r\nmcp-method: {method}\r\nmcp-name: {name}\r\n");
    if let Some(user) = user {
        headers.push_str(&format!("x-user: {user}\r\n"));
    }
    headers
}

fn user(user: Option<&str>) -> String {
    user.map(|u| format!("x-user: {u}\r\n")).unwrap_or_default()
}

fn body_json(answer: &str) -> Value {
    serde_json::from_str(answer.rsplit('\n').next().unwrap()).unwrap()
}

/// A task of alice's in each era, completed: (modern, legacy) ids.
async fn tasks(servers: &Servers) -> (String, String) {
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"job","arguments":{{}},{META}}}}}"#
    );
    let answer = exchange(
        servers.general,
        &modern_headers("tools/call", "job", Some("alice")),
        &call,
    )
    .await;
    let modern = body_json(&answer)["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"job","arguments":{},"task":{"ttl":60000}}}"#;
    let answer = exchange(servers.general, &user(Some("alice")), call).await;
    let legacy = body_json(&answer)["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    // Each answered as completed before they are compared (the handler
    // ends at once; the answer then stays as it is).
    for (id, headers, body) in [
        (
            &modern,
            modern_headers("tasks/get", &modern, Some("alice")),
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{{"taskId":"{modern}",{META}}}}}"#
            ),
        ),
        (
            &legacy,
            user(Some("alice")),
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{{"taskId":"{legacy}"}}}}"#
            ),
        ),
    ] {
        let mut status = Value::Null;
        for _ in 0..500 {
            let answer = body_json(&exchange(servers.general, &headers, &body).await);
            status = answer["result"]["status"].clone();
            if status == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(status, "completed", "{id}");
    }
    (modern, legacy)
}

#[tokio::test]
async fn the_direct_tasks_get_answers_as_the_service_does() {
    let servers = start().await;
    let (modern, legacy) = tasks(&servers).await;
    let get = |id: &str, task: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/get","params":{{"taskId":"{task}",{META}}}}}"#
        )
    };
    let old = |id: &str, task: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/get","params":{{"taskId":"{task}"}}}}"#
        )
    };
    // As the TypeScript SDK writes a 2025-11-25 one: the method first.
    let method_first = |id: &str, task: &str| {
        format!(
            r#"{{"method":"tasks/get","params":{{"taskId":"{task}"}},"jsonrpc":"2.0","id":{id}}}"#
        )
    };
    let sse = "accept: application/json, text/event-stream\r\n";
    let mut answers = Vec::new();
    for caller in [Some("alice"), Some("bob"), None] {
        // An empty task id is a string the direct path reads too.
        for task in [modern.as_str(), legacy.as_str(), "no-such-task", ""] {
            // 2026-07-28, as a conforming client sends it, with a number
            // id, a string one and an empty one, and accepting a stream.
            let headers = modern_headers("tasks/get", task, caller);
            answers.push(same_answer(&servers, &headers, &get("4", task)).await);
            answers.push(same_answer(&servers, &headers, &get(r#""a\"b""#, task)).await);
            answers.push(same_answer(&servers, &headers, &get(r#""""#, task)).await);
            let headers = format!("{headers}{sse}");
            answers.push(same_answer(&servers, &headers, &get("5", task)).await);
            // 2025-11-25.
            let headers = user(caller);
            answers.push(same_answer(&servers, &headers, &old("6", task)).await);
            answers.push(same_answer(&servers, &headers, &old(r#""x""#, task)).await);
            answers.push(same_answer(&servers, &headers, &old(r#""""#, task)).await);
            answers.push(same_answer(&servers, &headers, &method_first("7", task)).await);
        }
    }
    // The cases are the ones meant: both eras' task found, and not found.
    let results: Vec<Value> = answers.iter().map(|a| body_json(a)).collect();
    assert!(results
        .iter()
        .any(|r| r["result"]["taskId"] == modern.as_str()));
    assert!(results
        .iter()
        .any(|r| r["result"]["taskId"] == legacy.as_str()));
    assert!(results.iter().any(|r| r["error"]["code"] == -32602));
    assert!(answers.iter().all(|a| a.starts_with("HTTP/1.1 200 OK")));

    let alice = Some("alice");
    let bad = [
        // Malformed params, each era.
        (
            modern_headers("tasks/get", "5", alice),
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{{"taskId":5,{META}}}}}"#
            ),
        ),
        (
            modern_headers("tasks/get", "x", alice),
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{{{META}}}}}"#),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":5}}"#.to_owned(),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{}}"#.to_owned(),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get"}"#.to_owned(),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":[1]}"#.to_owned(),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"a\u0062c"}}"#
                .to_owned(),
        ),
        // Headers that disagree with the body.
        (
            modern_headers("tasks/get", "other", alice),
            get("8", &modern),
        ),
        (user(alice), get("8", &modern)),
        // Each 2026-07-28 header checked: another method; another version
        // than the body's (both served); a name twice (the same), padded,
        // or encoded for a plain id; a task id in the encoded form.
        (
            modern_headers("tasks/cancel", &modern, alice),
            get("8", &modern),
        ),
        (
            modern_headers("tasks/get", &modern, alice).replace(
                "mcp-protocol-version: 2026-07-28",
                "mcp-protocol-version: 2025-11-25",
            ),
            get("8", &modern),
        ),
        (
            format!(
                "{}mcp-name: {modern}\r\n",
                modern_headers("tasks/get", &modern, alice)
            ),
            get("8", &modern),
        ),
        (
            modern_headers("tasks/get", &modern, alice).replace(
                &format!("mcp-name: {modern}"),
                &format!("mcp-name:   {modern}  "),
            ),
            get("8", &modern),
        ),
        (
            modern_headers("tasks/get", &modern, alice)
                .replace("mcp-method: tasks/get", "mcp-method:  tasks/get "),
            get("8", &modern),
        ),
        (
            modern_headers("tasks/get", "=?base64?YWI=?=", alice),
            get("8", "ab"),
        ),
        (
            modern_headers("tasks/get", "=?base64?YWI=?=", alice),
            get("8", "=?base64?YWI=?="),
        ),
        // A version the layer does not serve; no tasks capability.
        (
            modern_headers("tasks/get", &modern, alice).replace("2026-07-28", "2099-01-01"),
            get("9", &modern).replace("2026-07-28", "2099-01-01"),
        ),
        (
            modern_headers("tasks/get", &modern, alice),
            get("10", &modern).replace(r#""io.modelcontextprotocol/tasks":{}"#, ""),
        ),
        // A notification; not a request; not JSON.
        (
            user(alice),
            format!(r#"{{"jsonrpc":"2.0","method":"tasks/get","params":{{"taskId":"{legacy}"}}}}"#),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"x"},"extra":"#
                .to_owned(),
        ),
        (
            user(alice),
            r#"{"jsonrpc":"1.0","id":12,"method":"tasks/get","params":{"taskId":"x"}}"#.to_owned(),
        ),
    ];
    let mut statuses = Vec::new();
    for (headers, body) in &bad {
        let answer = same_answer(&servers, headers, body).await;
        statuses.push(answer.lines().next().unwrap().to_owned());
    }
    for status in ["200", "202", "400"] {
        assert!(
            statuses.iter().any(|s| s.contains(status)),
            "{status}: {statuses:?}"
        );
    }
    let _ = &servers.ready;
}

/// The direct path is the one taken: it answers while the service is not
/// ready, which the service's path waits for.
#[tokio::test]
async fn the_direct_tasks_get_does_not_call_the_service() {
    let servers = start().await;
    let (modern, legacy) = tasks(&servers).await;
    servers.ready.store(false, Ordering::Release);
    // The shapes read on their bytes (each era's, and the TypeScript
    // SDK's order), and another (decoded).
    let plain = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{legacy}"}}}}"#
    );
    let spaced = plain.replace(r#""id":1"#, r#""id": "a\"b""#);
    let method_first = format!(
        r#"{{"method":"tasks/get","params":{{"taskId":"{legacy}"}},"jsonrpc":"2.0","id":1}}"#
    );
    let alice = user(Some("alice"));
    let modern_body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{modern}",{META}}}}}"#
    );
    let modern_head = modern_headers("tasks/get", &modern, Some("alice"));
    for (headers, body) in [
        (&alice, plain),
        (&alice, spaced),
        (&alice, method_first),
        (&modern_head, modern_body),
    ] {
        for addr in [servers.direct, servers.routed] {
            let answer =
                tokio::time::timeout(Duration::from_secs(10), exchange(addr, headers, &body))
                    .await
                    .expect("answered without the service");
            assert_eq!(
                body_json(&answer)["result"]["status"],
                "completed",
                "{answer}"
            );
        }
    }
}

/// A layer with its own owner extractor: the direct path reads owners as
/// it does, not from the identity hook's `TaskOwner`. This extractor makes
/// every caller one owner, so bob reads alice's tasks, as the service's
/// way answers.
#[tokio::test]
async fn the_direct_tasks_get_reads_owners_with_the_layers_extractor() {
    let layer =
        TaskLayer::new(MemoryStore::new()).with_owner_extractor(|_| Some("everyone".to_owned()));
    let servers = start_with(layer).await;
    let (modern, legacy) = tasks(&servers).await;
    for caller in [Some("alice"), Some("bob"), None] {
        let modern_body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{modern}",{META}}}}}"#
        );
        let answer = same_answer(
            &servers,
            &modern_headers("tasks/get", &modern, caller),
            &modern_body,
        )
        .await;
        assert_eq!(
            body_json(&answer)["result"]["status"],
            "completed",
            "{answer}"
        );
        for body in [
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{legacy}"}}}}"#
            ),
            format!(
                r#"{{"method":"tasks/get","params":{{"taskId":"{legacy}"}},"jsonrpc":"2.0","id":3}}"#
            ),
        ] {
            let answer = same_answer(&servers, &user(caller), &body).await;
            assert_eq!(
                body_json(&answer)["result"]["status"],
                "completed",
                "{answer}"
            );
        }
    }
}
