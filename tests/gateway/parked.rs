//! Calls waiting for the client's answers: how many the gateway holds, in
//! all and for one client.

use std::time::Duration;

use mcp_task_layer::gateway::ProxyConfig;
use mcp_task_layer::TaskPolicy;
use serde_json::json;

use crate::harness::{events_file, python, Gateway};

/// One client cannot take every slot for calls waiting for answers: past
/// its own bound its next such call fails with a precise error (and is
/// cancelled upstream), while another client's call still waits; a call
/// that stops waiting (its task cancelled) gives its client's slot back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_every_call_waiting_for_answers() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(30))
        .with_tool_policy("confirm_delete", TaskPolicy::Task)
        .with_parked_calls(Duration::from_secs(600), 10)
        .with_parked_calls_per_owner(1);
    let alice = Gateway::with_config(up, cfg).await;
    let bob = alice.as_owner("bob");
    let first = ask(&alice, "a1.txt").await;
    alice.status(&first, "input_required").await;
    assert_eq!(alice.proxy.calls_in_flight(), (1, 1));

    let second = ask(&alice, "a2.txt").await;
    let failed = alice.status(&second, "failed").await;
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("already has 1 calls waiting for answers"),
        "{failed}"
    );

    let theirs = ask(&bob, "b1.txt").await;
    bob.status(&theirs, "input_required").await;
    assert_eq!(alice.proxy.calls_in_flight().1, 2);

    alice
        .send26("tasks/cancel", json!({ "taskId": first }), true)
        .await;
    let third = ask(&alice, "a3.txt").await;
    alice.status(&third, "input_required").await;
    assert_eq!(
        alice.proxy.calls_in_flight().1,
        2,
        "bob's and alice's third"
    );
}

/// A `confirm_delete` task of `gw`'s caller; its id.
async fn ask(gw: &Gateway, file: &str) -> String {
    let r = gw.call("confirm_delete", json!({ "filename": file })).await;
    r["taskId"].as_str().unwrap().to_owned()
}

/// An MRTR retry is the same request: a `requestState` of a `tools/call`
/// sent with another method (a `prompts/get`) names nothing, and the call
/// still waits for its own retry. Before, any forwarded method took the
/// call up, and over stdio ran it beside the call active on its process
/// without waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_request_state_is_taken_only_by_its_own_retry() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("confirm_delete", TaskPolicy::Sync)]).await;
    let call = json!({ "name": "confirm_delete", "arguments": { "filename": "m.txt" } });
    let asked = gw.send26("tools/call", call.clone(), false).await;
    let asked = crate::common::ok(&asked);
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let state = asked["requestState"].clone();
    let key = crate::harness::first_question(asked);
    let answers = json!({ key: { "action": "accept", "content": { "confirm": true } } });

    let other = gw
        .send26(
            "prompts/get",
            json!({ "name": "greeting", "requestState": state, "inputResponses": answers }),
            false,
        )
        .await;
    let refused = crate::common::err(&other);
    assert_eq!(refused.code, -32602, "{refused:?}");
    assert_eq!(gw.proxy.calls_in_flight().1, 1, "the call still waits");

    let mut retry = call;
    retry["requestState"] = state;
    retry["inputResponses"] = answers;
    let done = gw.send26("tools/call", retry, false).await;
    assert_eq!(
        crate::harness::text(crate::common::ok(&done)),
        "Deleted m.txt."
    );
}
