//! The stream itself: broken lines, `notifications/cancelled`, the end of
//! the input.

use super::*;

#[tokio::test]
async fn broken_lines_get_their_errors_and_the_stream_goes_on() {
    let mut s = Server::start(memory());
    s.write_raw(b"this is not json\n").await;
    let e = s.expect("-32700", |m| m["error"].is_object()).await;
    assert_eq!(e["id"], Value::Null);
    assert_eq!(e["error"]["code"], -32700);

    s.write_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}\n")
        .await;
    let e = s
        .expect("-32700 for non-UTF-8", |m| m["error"].is_object())
        .await;
    assert_eq!(e["error"]["code"], -32700, "not UTF-8: {e}");

    s.write_raw(b"[1,2]\n{\"jsonrpc\":\"2.0\",\"id\":9,\"params\":{}}\n")
        .await;
    let e = s.expect("-32600", |m| m["error"].is_object()).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    let e = s.expect("-32600 with id", |m| m["error"].is_object()).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(9), json!(-32600))
    );

    // Over the 4 MiB line limit: refused, and the next line is served.
    let mut long =
        b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\",\"params\":{\"pad\":\"".to_vec();
    long.resize(long.len() + 4 * 1024 * 1024 + 1, b'x');
    long.extend_from_slice(b"\"}}\n");
    s.write_raw(&long).await;
    let e = s
        .expect("refused long line", |m| m["error"].is_object())
        .await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    s.initialize().await;
    assert!(
        s.stash.is_empty(),
        "nothing else was written: {:?}",
        s.stash
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn notifications_cancelled_drops_an_in_flight_request_but_not_its_task() {
    let mut s = Server::start(memory());
    s.initialize().await;
    let created = s
        .call(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}, "task": {}}),
        )
        .await;
    let task = created["task"]["taskId"].as_str().unwrap().to_owned();
    // A tasks/result blocks while the task runs: it is in flight.
    let waiting = s.request("tasks/result", json!({"taskId": task})).await;
    s.write(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": waiting, "reason": "user"}
    }))
    .await;
    // Read in order: ping's response comes after the cancel was handled.
    let ping = s.request("ping", json!({})).await;
    s.response(ping).await;
    assert_eq!(
        s.call("tasks/get", json!({"taskId": task})).await["status"],
        "working",
        "R46: cancelling a request does not cancel its task"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
    assert!(
        !s.stash.iter().any(|m| m["id"] == waiting),
        "a cancelled request gets no response: {:?}",
        s.stash
    );
}

#[tokio::test]
async fn eof_lets_the_request_in_flight_finish_then_the_server_exits() {
    let mut s = Server::start(memory());
    let running = s
        .call26(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "left running"}}),
        )
        .await;
    assert_eq!(running["resultType"], "task");
    // Answered inside the 100 ms window, after stdin has closed.
    let last = s
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.05, "label": "last"}, "_meta": meta()}),
        )
        .await;
    s.close_and_wait(Duration::from_secs(10)).await;
    let answer = s.response(last).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "computed last in 0.05s",
        "{answer}"
    );
}
