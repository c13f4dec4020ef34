//! Server→client messages over SSE: the `Peer` the endpoint puts in a
//! request's extensions, and the second `POST` that answers it.

use super::*;

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
