//! Identity refusals over real HTTP (issue 28): a request refused for its
//! caller's identity is HTTP 401 with a `WWW-Authenticate: Bearer`
//! challenge (no credentials, or credentials that are not valid) or 403 (a
//! caller known but not allowed), as the MCP authorization spec has it;
//! JSON-RPC errors stay for everything about the request itself. Auth
//! binding (protocol.md §4, R51) is enforced behind these answers.
#![cfg(feature = "axum")]

mod common;

use common::wire::{send, Reply};

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{Extensions, Method, StatusCode};
use http_body_util::Full;
use mcp_task_layer::{
    IdentityRefusal, JsonRpcRequest, JsonRpcResponse, McpEndpoint, MemoryStore, TaskLayer,
    TaskOwner, TaskPolicy,
};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tower::{service_fn, ServiceBuilder};

/// Tokens this server knows: `alice` may call, `guest` is known but not
/// allowed; any other token is not valid.
fn authenticate(parts: &Parts, extensions: &mut Extensions) -> Result<(), IdentityRefusal> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or(IdentityRefusal::Missing)?;
    let token = header
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(IdentityRefusal::Invalid)?;
    match token {
        "alice" => {
            extensions.insert(TaskOwner::new(token));
            Ok(())
        }
        "guest" => Err(IdentityRefusal::Forbidden),
        _ => Err(IdentityRefusal::Invalid),
    }
}

/// Takes any bearer token as the owner, refuses nothing.
fn any_bearer(parts: &Parts, extensions: &mut Extensions) {
    let token = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = token {
        extensions.insert(TaskOwner::new(token));
    }
}

struct Server {
    addr: SocketAddr,
    /// Requests that reached the inner service.
    calls: Arc<AtomicUsize>,
}

/// A layer whose `wait` tool is a task (it runs until cancelled) and whose
/// `echo` tool answers at once, behind `endpoint`'s identity hook.
async fn start(
    required: bool,
    hook: impl FnOnce(McpEndpoint<BoxService>) -> McpEndpoint<BoxService>,
) -> Server {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let inner = service_fn(move |req: JsonRpcRequest| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move {
            let tool = req.params_object().and_then(|p| p.get("name"));
            if tool.and_then(Value::as_str) == Some("wait") {
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(JsonRpcResponse::result(
                req.id,
                json!({"resultType": "complete", "content": [{"type": "text", "text": "echo"}]}),
            ))
        }
    });
    let service = ServiceBuilder::new()
        .layer(
            TaskLayer::new(MemoryStore::new())
                .with_tool_policy("wait", TaskPolicy::Task)
                .with_identity_required(required),
        )
        .service(inner);
    let service: BoxService = tower::util::BoxCloneSyncService::new(service);
    let app = hook(McpEndpoint::new(service)).into_router("/mcp");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server { addr, calls }
}

type BoxService = tower::util::BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// A 2026-07-28 `tools/call` of `tool` from a client that declared tasks.
fn call_tool(id: i64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        },
    }})
}

/// POST `body` with the headers a conforming client derives from it, and
/// `authorization` if given.
async fn post(addr: SocketAddr, body: &Value, authorization: Option<&str>) -> Reply {
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", body["method"].as_str().unwrap().to_owned()),
    ];
    if let Some(name) = body["params"]["name"].as_str() {
        headers.push(("mcp-name", name.to_owned()));
    }
    if let Some(value) = authorization {
        headers.push(("authorization", value.to_owned()));
    }
    let headers: Vec<(String, String)> = headers
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
    send(
        addr,
        Method::POST,
        &headers,
        Full::new(axum::body::Bytes::from(body.to_string())),
    )
    .await
}

fn challenge(reply: &Reply) -> &str {
    reply
        .headers
        .get("www-authenticate")
        .unwrap_or_else(|| panic!("no WWW-Authenticate: {reply:?}"))
        .to_str()
        .unwrap()
}

#[tokio::test]
async fn a_request_without_credentials_gets_401_with_a_bearer_challenge() {
    let server = start(false, |e| e.with_authentication(authenticate)).await;
    let reply = post(server.addr, &call_tool(1, "echo"), None).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{reply:?}");
    assert_eq!(challenge(&reply), r#"Bearer realm="mcp""#);
    let body = reply.json();
    assert!(
        body.get("id").is_none(),
        "refused before the body is read: {body}"
    );
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_eq!(
        server.calls.load(Ordering::SeqCst),
        0,
        "the server saw nothing"
    );
}

#[tokio::test]
async fn invalid_credentials_get_401_with_invalid_token() {
    let server = start(false, |e| e.with_authentication(authenticate)).await;
    for authorization in ["Bearer mallory", "Basic YWxpY2U6cHc=", "Bearer"] {
        let reply = post(server.addr, &call_tool(1, "echo"), Some(authorization)).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{authorization}");
        assert_eq!(
            challenge(&reply),
            r#"Bearer realm="mcp", error="invalid_token""#,
            "{authorization}"
        );
        assert_eq!(reply.error()["code"], -32600);
    }
    assert_eq!(server.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_known_caller_not_allowed_gets_403() {
    let server = start(false, |e| e.with_authentication(authenticate)).await;
    let reply = post(server.addr, &call_tool(1, "echo"), Some("Bearer guest")).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{reply:?}");
    assert_eq!(
        challenge(&reply),
        r#"Bearer realm="mcp", error="insufficient_scope""#
    );
    assert_eq!(reply.error()["code"], -32600);
    assert_eq!(server.calls.load(Ordering::SeqCst), 0);
}

/// An authenticated caller's request errors stay JSON-RPC errors: bad JSON
/// is 400 `-32700`, an unknown task 200 `-32602` (R51: identical to a
/// foreign one), never 401 or 403.
#[tokio::test]
async fn an_authenticated_callers_request_errors_stay_json_rpc_errors() {
    let server = start(false, |e| e.with_authentication(authenticate)).await;
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("authorization".to_owned(), "Bearer alice".to_owned()),
    ];
    let reply = send(
        server.addr,
        Method::POST,
        &headers,
        Full::new(axum::body::Bytes::from_static(b"{")),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(!reply.headers.contains_key("www-authenticate"));
    assert_eq!(reply.error()["code"], -32700);

    let mut get = call_tool(2, "echo");
    get["method"] = json!("tasks/get");
    get["params"] = json!({"taskId": "no-such-task", "_meta": get["params"]["_meta"].clone()});
    let mut headers = headers.clone();
    headers.extend([
        ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ("mcp-method".to_owned(), "tasks/get".to_owned()),
        ("mcp-name".to_owned(), "no-such-task".to_owned()),
    ]);
    let reply = send(
        server.addr,
        Method::POST,
        &headers,
        Full::new(axum::body::Bytes::from(get.to_string())),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert!(!reply.headers.contains_key("www-authenticate"));
    assert_eq!(reply.json()["error"]["code"], -32602);
    assert_eq!(reply.json()["id"], 2);

    let reply = post(server.addr, &call_tool(3, "echo"), Some("Bearer alice")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["content"][0]["text"], "echo");
}

/// `TaskLayer::with_identity_required`: an anonymous call that would make a
/// task is refused by the layer, not the hook; the endpoint answers it
/// with 401 and the challenge, with the request's id. Before issue 28 it
/// was HTTP 200 with `-32600`.
#[tokio::test]
async fn a_layer_requiring_an_identity_refuses_an_anonymous_task_with_401() {
    let server = start(true, |e| e.with_identity(any_bearer)).await;
    let reply = post(server.addr, &call_tool(7, "wait"), None).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{reply:?}");
    assert_eq!(challenge(&reply), r#"Bearer realm="mcp""#);
    let body = reply.json();
    assert_eq!(body["id"], 7, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid request: a task needs an identified caller"
    );
    assert_eq!(server.calls.load(Ordering::SeqCst), 0, "no handler ran");

    // A call that makes no task passes anonymously; an identified caller's
    // task call makes a task.
    let reply = post(server.addr, &call_tool(8, "echo"), None).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!reply.headers.contains_key("www-authenticate"));
    let reply = post(server.addr, &call_tool(9, "wait"), Some("Bearer bob")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["result"]["resultType"], "task", "{reply:?}");
}
