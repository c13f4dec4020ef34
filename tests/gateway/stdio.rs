//! The gateway behind the stdio transport, as `mcp-tasks gateway --stdio`
//! serves it: a client's cancel, a question the client leaves unanswered,
//! and a 2025-11-25 client's declared capabilities, seen on the wire.

use std::time::Duration;

use mcp_task_layer::TaskPolicy;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

use crate::harness::{event, events, events_file, python, text, Gateway};

/// `gw` served by a `StdioTransport` over in-memory pipes: the client's
/// input end, its output's lines, and the served stream.
fn serve(
    gw: &Gateway,
) -> (
    DuplexStream,
    Lines<BufReader<DuplexStream>>,
    JoinHandle<std::io::Result<()>>,
) {
    let (client, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    let served = tokio::spawn(
        mcp_task_layer::StdioTransport::new(gw.service())
            .with_owner(mcp_task_layer::TaskOwner::new("stdio"))
            .serve(BufReader::new(server_in), server_out),
    );
    (client, BufReader::new(client_out).lines(), served)
}

/// Write `message` as one line.
async fn send(client: &mut DuplexStream, message: serde_json::Value) {
    client
        .write_all(format!("{message}\n").as_bytes())
        .await
        .unwrap();
}

/// The next line the client reads, within 20 s (`waiting` says for what).
async fn next(lines: &mut Lines<BufReader<DuplexStream>>, waiting: &str) -> serde_json::Value {
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect(waiting)
        .unwrap()
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_stdio_transport_a_clients_cancel_of_a_synchronous_call_reaches_the_upstream() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("slow_compute", TaskPolicy::Sync)]).await;
    let (mut client, mut lines, served) = serve(&gw);
    send(
        &mut client,
        json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params":
            { "name": "slow_compute", "arguments": { "seconds": 60, "label": "piped" } } }),
    )
    .await;
    event(&file, "started slow_compute").await;
    // The transport drops the call's future on the cancel; the gateway
    // keeps no watch of its own for it.
    assert_eq!(gw.proxy.cancellable_requests(), 0);
    assert_eq!(gw.proxy.calls_in_flight().0, 1);
    send(
        &mut client,
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": 7, "reason": "changed my mind" } }),
    )
    .await;
    // Dropped, the upstream call tells the upstream to stop (R-cancel:
    // the cancelled request gets no answer).
    event(&file, "cancelled piped").await;
    assert_eq!(gw.proxy.calls_in_flight().0, 0);
    // The stream still serves: the next call is answered, and it is the
    // first line the client reads (none for the cancelled request).
    send(
        &mut client,
        json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/call", "params":
            { "name": "greet", "arguments": { "name": "z" } } }),
    )
    .await;
    let answer = next(&mut lines, "the next call is answered").await;
    assert_eq!(answer["id"], 8, "{answer}");
    assert_eq!(text(&answer["result"]), "Hello, z!");
    drop(client);
    served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_the_client_leaves_unanswered_does_not_hold_the_calls_answer() {
    // server-everything asks for roots on its own during a call and answers
    // the call without waiting; a 2025-11-25 client that does not answer
    // (here: one that reads only answers) held the call for ever: the
    // gateway waited for the client's reply before it looked at the call's
    // answer again. And a question read just before the call's answer was
    // never answered upstream.
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("nudge_roots", TaskPolicy::Sync)]).await;
    let (mut client, mut lines, served) = serve(&gw);
    // 0.2 s: asked, relayed, then answered; 0: the question and the answer
    // leave the upstream back to back.
    for (id, wait) in [(1, 0.2), (2, 0.0)] {
        let call = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "nudge_roots", "arguments": { "wait": wait } } });
        send(&mut client, call).await;
        let mut asked = 0;
        let answer = loop {
            // Not answered by the client: the call's answer still comes.
            let message = next(
                &mut lines,
                "the call is answered though its question is not",
            )
            .await;
            match message["method"].as_str() {
                Some(method) => {
                    assert_eq!(method, "roots/list", "{message}");
                    asked += 1;
                }
                None => break message,
            }
        };
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(text(&answer["result"]), "done");
        if wait > 0.0 {
            assert_eq!(asked, 1, "the question is relayed to the client");
        }
        // The upstream's question got an answer too: an error (bounded
        // polling of the upstream's events).
        let refused = || {
            events(&file)
                .iter()
                .filter(|e| *e == "roots refused")
                .count()
        };
        for _ in 0..400 {
            if refused() >= id as usize {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(refused(), id as usize, "{:?}", events(&file));
        assert_eq!(gw.proxy.calls_in_flight().0, 0);
    }
    drop(client);
    served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_2025_client_is_never_asked_what_it_did_not_declare() {
    // The gateway declares roots, elicitation and sampling upstream for
    // every client; a 2025-11-25 client over stdio that declared none of
    // them is not sent the upstream's roots/list (it used to be): the
    // gateway answers as such a client would, with no roots.
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("ask_roots", TaskPolicy::Sync)]).await;
    let (mut client, mut lines, served) = serve(&gw);
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "t", "version": "1" } } });
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "ask_roots", "arguments": {} } });
    send(&mut client, init).await;
    assert_eq!(next(&mut lines, "initialize is answered").await["id"], 1);
    send(&mut client, call).await;
    let answer = next(&mut lines, "the call is answered").await;
    assert_eq!(answer["id"], 2, "the client was asked: {answer}");
    assert_eq!(text(&answer["result"]), "", "no roots: {answer}");
    event(&file, "finished ask_roots").await;
    drop(client);
    served.await.unwrap().unwrap();
}
