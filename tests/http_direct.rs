//! `McpEndpoint::serve` hands each request straight from hyper to the
//! endpoint (hyper's body, no boxing, no `oneshot`): it answers every
//! request, refused ones included, exactly as the endpoint's router
//! served by `axum::serve` answers it.
#![cfg(feature = "axum")]

use std::convert::Infallible;
use std::future::IntoFuture;
use std::net::SocketAddr;

use mcp_task_layer::{IdentityRefusal, JsonRpcRequest, JsonRpcResponse, McpEndpoint};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::service_fn;

type Inner = tower::util::BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// Echoes the method; refuses callers with `authorization: no`.
fn endpoint() -> McpEndpoint<Inner> {
    let inner = service_fn(|req: JsonRpcRequest| async move {
        Ok::<_, Infallible>(JsonRpcResponse::result(
            req.id,
            json!({"method": req.method}),
        ))
    });
    McpEndpoint::new(Inner::new(inner))
        .with_body_limit(256)
        .with_authentication(|parts, _| match parts.headers.get("authorization") {
            Some(v) if v == "no" => Err(IdentityRefusal::Invalid),
            _ => Ok(()),
        })
}

async fn through_router() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = endpoint().into_router("/mcp");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn through_serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(endpoint().serve(listener, "/mcp").into_future());
    addr
}

/// The answer to `request` (sent whole, then the connection read to its
/// end): its status line, the headers that matter, and its body.
async fn answer(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    // A refused request's connection may be reset after its answer.
    let _ = stream.read_to_end(&mut bytes).await;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an answer");
    let mut lines = head.lines();
    let mut kept = vec![lines.next().unwrap().to_owned()];
    let mut headers: Vec<String> = lines
        .map(str::to_lowercase)
        .filter(|l| {
            [
                "content-type:",
                "allow:",
                "www-authenticate:",
                "content-length:",
            ]
            .iter()
            .any(|name| l.starts_with(name))
        })
        .collect();
    headers.sort();
    kept.extend(headers);
    kept.push(body.to_owned());
    kept.join("\n")
}

fn post(path: &str, headers: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{headers}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn serve_answers_every_request_as_the_router_does() {
    let (router, direct) = (through_router().await, through_serve().await);
    let json = "content-type: application/json\r\n";
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let modern = r#"{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(400)
    );
    let requests = [
        post("/mcp", json, ping),
        post("/mcp", &format!("{json}accept: application/json, text/event-stream\r\n"), ping),
        post("/mcp", &format!("{json}origin: https://evil.example\r\n"), ping),
        post("/mcp", &format!("{json}origin: http://localhost:3000\r\n"), ping),
        post("/mcp", "content-type: text/plain\r\n", ping),
        post("/mcp", "", ping),
        post("/mcp", &format!("{json}authorization: no\r\n"), ping),
        post("/mcp", json, &big),
        post("/mcp", json, "{not json"),
        post("/mcp", json, "[1,2]"),
        post("/mcp", json, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        post("/mcp", json, r#"{"jsonrpc":"2.0","id":"srv-1","result":{}}"#),
        post("/mcp", json, modern),
        post(
            "/mcp",
            &format!("{json}mcp-protocol-version: 2026-07-28\r\nmcp-method: tasks/get\r\nmcp-name: t\r\n"),
            modern,
        ),
        post("/other", json, ping),
        "GET /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".to_owned(),
        "POST /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n\
         expect: 100-continue\r\ncontent-length: 100000000\r\n\r\n"
            .to_owned(),
    ];
    let mut statuses = Vec::new();
    for request in &requests {
        let (a, b) = (answer(router, request).await, answer(direct, request).await);
        assert_eq!(a, b, "{request}");
        statuses.push(a.lines().next().unwrap().to_owned());
    }
    // The cases are the ones meant: each refusal is there.
    for status in [
        "200", "202", "400", "401", "403", "404", "405", "413", "415",
    ] {
        assert!(
            statuses.iter().any(|s| s.contains(status)),
            "{status}: {statuses:?}"
        );
    }
}

/// An answer's headers are its own, none of its request's (the endpoint
/// writes them into the request's emptied header map, which hyper then
/// parses the connection's next request into): on every request of a
/// kept-alive connection, an answer without a peer and one with (`Accept`
/// lists `text/event-stream`), through the router and through `serve`.
#[tokio::test]
async fn answers_carry_none_of_their_requests_headers() {
    let json = "content-type: application/json\r\nx-echo: 1\r\nmcp-name: t\r\n";
    let sse = "accept: application/json, text/event-stream\r\n";
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let kept = |headers: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: x\r\n{headers}content-length: {}\r\n\r\n{ping}",
            ping.len()
        )
    };
    let requests = [
        kept(json),
        kept(&format!("{json}{sse}")),
        kept(json),
        post("/mcp", &format!("{json}{sse}"), ping),
    ];
    for addr in [through_router().await, through_serve().await] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        for request in &requests {
            stream.write_all(request.as_bytes()).await.unwrap();
        }
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let answers: Vec<&str> = text.split("HTTP/1.1 ").skip(1).collect();
        assert_eq!(answers.len(), requests.len(), "{text}");
        for answer in answers {
            let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
            assert!(head.starts_with("200 OK"), "{head}");
            assert_eq!(
                body,
                r#"{"jsonrpc":"2.0","id":7,"result":{"method":"ping"}}"#
            );
            for line in head.lines().skip(1) {
                let name = line.split(':').next().unwrap().to_lowercase();
                assert!(
                    ["content-type", "content-length", "date", "connection"]
                        .contains(&name.as_str()),
                    "{head}"
                );
            }
            // Exactly one, whichever way the endpoint writes it (it
            // appends it to the answer's header map).
            let types: Vec<&str> = head
                .lines()
                .filter(|line| line.to_lowercase().starts_with("content-type:"))
                .collect();
            assert_eq!(types, ["content-type: application/json"], "{head}");
        }
    }
}
