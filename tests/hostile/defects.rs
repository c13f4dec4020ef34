//! The holes a hostile review found (issue "Close the holes"), each over
//! real HTTP with its exact status and error code. Each test failed on the
//! code before its fix.

use serde_json::{json, Value};

use crate::client::{accept_name, modern, post, routing, rpc};
use crate::world::start;
use crate::{ALICE, PV};

/// POST `body` as `caller`: the HTTP status and the JSON-RPC reply.
async fn call(addr: std::net::SocketAddr, body: &Value, caller: Option<&str>) -> (u16, Value) {
    let reply = post(addr, routing(body, caller), body.to_string()).await;
    let json = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    (reply.status.as_u16(), json)
}

/// Defect 4: a version the layer does not serve gets `-32022` (HTTP 400)
/// with the supported list, on every method the layer serves, and no task
/// is made (R-errors: UnsupportedProtocolVersion). Before the fix
/// `tasks/get` was answered and `tools/call` made a `working` task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_version_is_refused_before_any_task_exists() {
    let server = start().await;
    let mut id = 0;
    for (method, params) in [
        ("tools/call", json!({ "name": "hang", "arguments": {} })),
        (
            "tasks/get",
            json!({ "taskId": "0123456789abcdef0123456789abcdef" }),
        ),
        (
            "tasks/update",
            json!({ "taskId": "t", "inputResponses": {} }),
        ),
        ("tasks/cancel", json!({ "taskId": "t" })),
        (
            "subscriptions/listen",
            json!({ "notifications": { "taskIds": [] } }),
        ),
    ] {
        id += 1;
        let mut body = modern(id, method, params);
        body["params"]["_meta"][PV] = json!("2099-01-01");
        let (status, reply) = call(server.addr, &body, Some(ALICE)).await;
        assert_eq!(status, 400, "{method}: {reply}");
        assert_eq!(reply["error"]["code"], -32022, "{method}: {reply}");
        assert_eq!(reply["error"]["data"]["requested"], "2099-01-01");
        assert_eq!(reply["error"]["data"]["supported"], json!(["2026-07-28"]));
        assert_eq!(reply["id"], id);
    }
    assert_eq!(server.seen.calls("hang"), 0, "no handler ran");
}

/// Defect 5: `arguments` that are not an object are refused with `-32602`
/// before a task exists (before the fix a `CreateTaskResult` came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_are_not_an_object_make_no_task() {
    let server = start().await;
    for (id, arguments) in [(1, json!("str")), (2, json!([1])), (3, json!(7))] {
        let body = modern(
            id,
            "tools/call",
            json!({ "name": "hang", "arguments": arguments }),
        );
        let (status, reply) = call(server.addr, &body, Some(ALICE)).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        assert_eq!(
            reply["error"]["message"],
            "Invalid params: \"arguments\" must be an object"
        );
    }
    assert_eq!(server.seen.calls("hang"), 0, "no handler ran");
}

/// Defect 3: `inputResponses` sent with `tools/call` obey the answer limits
/// and count in the stored-call bound (before the fix 301 answers, 62
/// levels deep, were stored and the task could never be answered again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_sent_with_tools_call_obey_the_answer_limits() {
    let server = start().await;
    let mut deep = json!({ "leaf": 1 });
    for _ in 0..61 {
        deep = json!({ "d": deep });
    }
    let many: serde_json::Map<String, Value> = (0..301)
        .map(|i| (format!("k{i}"), accept_name("x")))
        .collect();
    let big = json!({ "big": { "text": "x".repeat(2 << 20) } });
    let cases = [
        (
            json!(many),
            "\"inputResponses\" has 301 answers; at most 64 are accepted",
        ),
        (
            json!({ "deep": deep }),
            "the answer under \"deep\" nests deeper than 32 levels",
        ),
        (
            json!({ "bad": "not an object" }),
            "the answer under \"bad\" must be an object",
        ),
        (json!("nope"), "\"inputResponses\" must be an object"),
        (big, "\"inputResponses\" is larger than 1048576 bytes"),
    ];
    for (id, (answers, message)) in (1..).zip(cases) {
        let body = modern(
            id,
            "tools/call",
            json!({ "name": "ask", "arguments": {}, "inputResponses": answers }),
        );
        let (status, reply) = call(server.addr, &body, Some(ALICE)).await;
        assert_eq!(status, 200);
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        assert_eq!(
            reply["error"]["message"],
            format!("Invalid params: {message}")
        );
    }
    // Within the answer limits but, with the arguments, over the stored
    // call's bound (1 MiB): refused too.
    let answers = json!({ "a": { "text": "y".repeat(600 << 10) } });
    let arguments = json!({ "text": "z".repeat(600 << 10) });
    let body = modern(
        9,
        "tools/call",
        json!({ "name": "ask", "arguments": arguments, "inputResponses": answers }),
    );
    let (_, reply) = call(server.addr, &body, Some(ALICE)).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(
        reply["error"]["message"],
        "Invalid params: the call's arguments are larger than 1048576 bytes and cannot be stored with a task"
    );
    assert_eq!(server.seen.calls("ask"), 0, "no handler ran");
}

/// Defect 6: a 2025-11-25 `task.ttl` of 0 makes a task that lives the
/// documented minimum (1 s), and the answer says so (before the fix the
/// task was gone at the next `tasks/get`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_ttl_is_raised_to_the_minimum_and_reported() {
    let server = start().await;
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "hang", "arguments": {}, "task": { "ttl": 0 } }
    });
    let created = rpc(server.addr, &body, Some(ALICE)).await;
    let task = &created["result"]["task"];
    assert_eq!(task["ttl"], 1000, "{created}");
    let get = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tasks/get",
        "params": { "taskId": task["taskId"] }
    });
    let read = rpc(server.addr, &get, Some(ALICE)).await;
    assert_eq!(read["result"]["status"], "working", "{read}");
    assert_eq!(read["result"]["ttl"], 1000);
}
