//! What the endpoint checks and answers at the edge: routing headers, bodies,
//! methods, capabilities, and tasks bound to the bearer identity.

use super::*;

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
