//! The client's `notifications/cancelled` for a request in flight, where
//! nothing but the owner ties it to its request (HTTP).

use std::time::Duration;

use mcp_task_layer::TaskPolicy;
use serde_json::json;

use crate::common;
use crate::harness::{event, events, events_file, python, text, Gateway};

/// Two requests of one owner with the same id in flight at once (two HTTP
/// clients of one token, or two anonymous ones, counting ids alike): a
/// cancel that could name either stops neither, and the end of one leaves
/// the other cancellable. Before, the second request's watch replaced the
/// first's, so the cancel stopped whichever came last, and the first's end
/// forgot the second's watch, so its own cancel was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_could_name_two_requests_stops_neither_and_each_end_forgets_its_own() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("slow_compute", TaskPolicy::Sync)]).await;
    let call = |seconds: f64, label: &str| {
        let gw = gw.as_owner("alice");
        let args =
            json!({ "name": "slow_compute", "arguments": { "seconds": seconds, "label": label } });
        tokio::spawn(async move { gw.send_with_id(2, "tools/call", args).await })
    };
    // Long enough for the second to start on a process of its own, even
    // on a loaded host.
    let first = call(6.0, "first");
    let second = call(60.0, "second");
    // Both running upstream (bounded: 30 s).
    for _ in 0..600 {
        let started = events(&file)
            .iter()
            .filter(|l| *l == "started slow_compute")
            .count();
        if started == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(gw.proxy.cancellable_requests(), 2);
    gw.notify("notifications/cancelled", json!({ "requestId": 2 }))
        .await;
    let done = first.await.unwrap();
    assert_eq!(text(common::ok(&done)), "computed first in 6s");
    // The first's end forgot its own watch only: the second's cancel now
    // names one request, and reaches it.
    assert_eq!(gw.proxy.cancellable_requests(), 1);
    gw.notify("notifications/cancelled", json!({ "requestId": 2 }))
        .await;
    event(&file, "cancelled second").await;
    let resp = second.await.unwrap();
    assert!(
        common::err(&resp).message.contains("cancelled"),
        "{:?}",
        common::err(&resp)
    );
    assert_eq!(gw.proxy.cancellable_requests(), 0);
}

/// A task whose upstream call waits for the client's answer expires (its
/// TTL): the upstream is told to cancel that call, and the gateway forgets
/// it. Before, an expired task left its call parked upstream for the park
/// TTL (24 h), holding a slot; only a cancel did this.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_expires_while_its_call_waits_cancels_the_call_upstream() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("confirm_delete", TaskPolicy::Task)]).await;
    let created = gw
        .send(
            "tools/call",
            json!({ "name": "confirm_delete", "arguments": { "filename": "e.txt" }, "task": { "ttl": 6000 } }),
        )
        .await;
    let task = common::ok(&created)["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // Bounded: 5 s, within the TTL.
    let mut status = json!(null);
    for _ in 0..100 {
        let got = gw.send("tasks/get", json!({ "taskId": task })).await;
        status = common::ok(&got)["status"].clone();
        if status == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "input_required");
    assert_eq!(gw.proxy.calls_in_flight().1, 1, "its call waits");
    // Expired after 6 s, reaped within the next second.
    event(&file, "cancelled confirm_delete e.txt").await;
    for _ in 0..200 {
        if gw.proxy.calls_in_flight() == (0, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(gw.proxy.calls_in_flight(), (0, 0), "the call is forgotten");
}
