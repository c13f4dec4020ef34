//! A hostile client over real HTTP: `McpEndpoint` around `common::layer()`
//! and the scripted server, on 127.0.0.1:0. Owner `alice` has five tasks
//! (waiting for input, working, completed, cancelled, and a 2025-11-25 one
//! that is working); then more than 500 malformed or adversarial requests
//! arrive. Each must get its exact answer (HTTP status, JSON-RPC code, id),
//! the server must keep answering, and no task may change.
//!
//! `world` starts the server and makes the five tasks; `client` writes
//! requests as a conforming client would (or by hand, for refused bodies);
//! `cases` holds the requests, grouped by what they break, and what each
//! must get back.
#![cfg(feature = "axum")]

#[path = "../common/mod.rs"]
mod common;

mod cases;
mod client;
mod defects;
mod edges;
mod owners;
mod world;

use common::wire::{send, Chunked};

use std::collections::BTreeMap;

use axum::body::Bytes;
use http_body_util::Full;
use serde_json::json;

use cases::{check, hostile_cases, label};
use client::{accept_name, legacy, modern, rpc, send_refused, Body};
use world::{setup, ALL, T};

const TASKS: &str = "io.modelcontextprotocol/tasks";
const PV: &str = "io.modelcontextprotocol/protocolVersion";
const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
const ALICE: &str = "alice";
const BOB: &str = "bob";
/// The one body of every unknown, foreign or other-era task id.
const NOT_FOUND: &str = "Failed to retrieve task: Task not found";
/// A well-formed id that no task has.
const UNKNOWN: &str = "0123456789abcdef0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_hostile_requests_change_nothing() {
    let mut w = setup().await;
    let addr = w.server.addr;
    let before = w.snapshot().await;
    let calls_before: Vec<usize> = ["ask", "hang", "echo"]
        .iter()
        .map(|t| w.server.seen.calls(t))
        .collect();

    let cases = hostile_cases(&w.ids);
    assert!(cases.0.len() >= 500, "only {} cases", cases.0.len());
    let mut failures = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let total = cases.0.len();
    for case in cases.0 {
        let refused = case.refused();
        let reply = match case.body {
            body if refused => send_refused(addr, &case.headers, body).await,
            Body::Full(bytes) => {
                send(
                    addr,
                    case.method,
                    &case.headers,
                    Full::new(Bytes::from(bytes)),
                )
                .await
            }
            Body::Chunked(chunks) => send(addr, case.method, &case.headers, Chunked(chunks)).await,
        };
        match check(&reply, &case.want, &before) {
            Ok(()) => *outcomes.entry(label(&case.want)).or_default() += 1,
            Err(why) => failures.push(format!("{}: {why}", case.what)),
        }
    }
    println!("{total} hostile requests:");
    for (outcome, count) in &outcomes {
        println!("  {count:>4}  {outcome}");
    }
    assert!(
        failures.is_empty(),
        "{} of {total} requests got the wrong answer:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // The server still answers, and nothing changed.
    let id = w.next_id();
    let ping = rpc(addr, &legacy(id, "ping", json!({})), None).await;
    assert_eq!(ping["result"], json!({ "resultType": "complete" }));
    let after = w.snapshot().await;
    for t in ALL {
        assert_eq!(after[&t], before[&t], "{t:?} changed");
    }
    assert_eq!(after[&T::Ask]["status"], "input_required");
    assert!(after[&T::Ask]["inputRequests"]["name"].is_object());
    assert_eq!(after[&T::Hang]["status"], "working");
    assert_eq!(after[&T::Done]["status"], "completed");
    assert_eq!(after[&T::Cancelled]["status"], "cancelled");
    assert_eq!(after[&T::Legacy]["status"], "working");
    let calls_after: Vec<usize> = ["ask", "hang", "echo"]
        .iter()
        .map(|t| w.server.seen.calls(t))
        .collect();
    assert_eq!(calls_after, calls_before, "no handler ran or resumed");
    assert_eq!(
        w.server
            .seen
            .cancelled_handlers
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert_eq!(
        w.server
            .seen
            .aborted_handlers
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );

    // alice's 2025-11-25 listing still shows her one legacy task, as it was.
    let id = w.next_id();
    let list = rpc(addr, &legacy(id, "tasks/list", json!({})), Some(ALICE)).await;
    assert_eq!(list["result"]["tasks"], json!([before[&T::Legacy]]));
    // And the task that waits for input still takes its answer.
    let id = w.next_id();
    let ask = w.id(T::Ask).to_owned();
    let body = modern(
        id,
        "tasks/update",
        json!({ "taskId": ask, "inputResponses": { "name": accept_name("Ada") } }),
    );
    assert_eq!(
        rpc(addr, &body, Some(ALICE)).await["result"],
        json!({ "resultType": "complete" })
    );
    let done = w.wait_for(T::Ask, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
}
