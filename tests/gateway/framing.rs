//! What a client writes reaches a stdio upstream as one message: params
//! with line breaks between their tokens (pretty-printed JSON, as an HTTP
//! client may send it) neither cut the request short nor let a line of
//! the client's choosing through as a message of its own.

use mcp_task_layer::{JsonRpcRequest, TaskPolicy};
use tower::ServiceExt;

use crate::harness::{events, events_file, python, text, Gateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_line_breaks_never_split_its_request_to_a_stdio_upstream() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(
        up,
        &[("echo", TaskPolicy::Sync), ("greet", TaskPolicy::Sync)],
    )
    .await;
    // Between the tokens of the arguments (the gateway copies each member's
    // value as written): `\r\n`, `\n` and a whole request on a line of its
    // own, inside an argument the tool does not read.
    let hidden = r#"{"jsonrpc":"2.0","id":"hidden","method":"tools/call","params":{"name":"greet","arguments":{"name":"Eve"}}}"#;
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\
         \"arguments\":{{\"text\":\"one\",\"x\":\r\n{hidden}\n}}}}}}"
    );
    let req = JsonRpcRequest::from_slice(body.as_bytes()).expect("a valid request");
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        gw.service().oneshot(req),
    )
    .await
    .expect("the request reached the upstream whole, and was answered")
    .unwrap();
    let result = answer.result_value().expect("a result");
    assert_eq!(text(result), "one", "{result}");
    // The hidden line was no call: the one greeting the upstream ran is
    // the one asked for after it.
    let r = gw.call("greet", serde_json::json!({ "name": "Ada" })).await;
    assert_eq!(text(&r), "Hello, Ada!");
    let greetings = events(&file)
        .iter()
        .filter(|l| *l == "started greet")
        .count();
    assert_eq!(greetings, 1, "{:?}", events(&file));
}
