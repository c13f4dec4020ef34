//! The gateway in front of tests/gateway/upstream.py.

use std::time::Duration;

use mcp_task_layer::TaskPolicy;
use serde_json::json;

use crate::common;
use crate::harness::{event, events, events_file, kill, python, text, Gateway};

const AUTO: TaskPolicy = TaskPolicy::Auto {
    within: Duration::from_millis(300),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_tool_stays_synchronous_and_a_long_one_becomes_a_task_with_progress() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("greet", TaskPolicy::Sync), ("long", AUTO)]).await;

    // R1: a quick tool answers in the call, no task.
    let r = gw.call("greet", json!({ "name": "Ada" })).await;
    assert_eq!(r["resultType"], "complete");
    assert!(r.get("taskId").is_none());
    assert_eq!(text(&r), "Hello, Ada!");

    // Past its `auto` budget a call is a task; the upstream's progress is
    // its statusMessage, and the upstream's result its result.
    let r = gw.call("long", json!({ "seconds": 3, "steps": 3 })).await;
    assert_eq!(r["resultType"], "task", "{r}");
    let task = r["taskId"].as_str().unwrap().to_owned();
    let t = gw
        .poll(&task, "a progress message", |t| {
            t["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("step "))
        })
        .await;
    assert_eq!(t["status"], "working");
    let t = gw.status(&task, "completed").await;
    assert_eq!(text(&t["result"]), "done after 3 steps");
    assert_eq!(
        events(&file)
            .iter()
            .filter(|l| *l == "started long")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_elicitation_round_trips_through_tasks_update_into_the_same_call() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(
        up,
        &[
            ("confirm_delete", TaskPolicy::Task),
            ("multi_input", TaskPolicy::Task),
        ],
    )
    .await;

    let r = gw
        .call("confirm_delete", json!({ "filename": "a.txt" }))
        .await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    let t = gw.status(&task, "input_required").await;
    let requests = t["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{t}");
    let (key, q) = requests.iter().next().unwrap();
    assert_eq!(q["method"], "elicitation/create");
    assert_eq!(q["params"]["message"], "Delete a.txt?");

    let ack = gw
        .send26(
            "tasks/update",
            json!({ "taskId": task, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } }),
            true,
        )
        .await;
    assert_eq!(common::ok(&ack)["resultType"], "complete");
    let t = gw.status(&task, "completed").await;
    assert_eq!(text(&t["result"]), "Deleted a.txt.");
    // The same upstream call went on: the tool started once.
    let started = events(&file)
        .iter()
        .filter(|l| *l == "started confirm_delete")
        .count();
    assert_eq!(started, 1, "{:?}", events(&file));

    // Two questions asked at once are two input requests; answered one at
    // a time (R45), the task waits for the second.
    let r = gw.call("multi_input", json!({})).await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    let t = gw.status(&task, "input_required").await;
    let keys: Vec<String> = t["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 2, "{t}");
    let answer = |k: &str, v| json!({ "taskId": task, "inputResponses": { k: { "action": "accept", "content": v } } });
    let first = if t["inputRequests"][&keys[0]]["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("name")
    {
        (keys[0].clone(), keys[1].clone())
    } else {
        (keys[1].clone(), keys[0].clone())
    };
    gw.send26(
        "tasks/update",
        answer(&first.0, json!({ "name": "Bo" })),
        true,
    )
    .await;
    let t = gw.get(&task).await;
    assert_eq!(t["status"], "input_required");
    assert_eq!(t["inputRequests"].as_object().unwrap().len(), 1, "{t}");
    gw.send26(
        "tasks/update",
        answer(&first.1, json!({ "confirm": true })),
        true,
    )
    .await;
    let t = gw.status(&task, "completed").await;
    assert!(text(&t["result"]).contains("Bo"), "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_upstream_call() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("slow_compute", TaskPolicy::Task)]).await;
    let r = gw
        .call("slow_compute", json!({ "seconds": 60, "label": "c1" }))
        .await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    event(&file, "started slow_compute").await;
    let ack = gw
        .send26("tasks/cancel", json!({ "taskId": task }), true)
        .await;
    assert_eq!(common::ok(&ack)["resultType"], "complete");
    // notifications/cancelled reached the upstream, which stopped the tool.
    event(&file, "cancelled c1").await;
    assert_eq!(gw.get(&task).await["status"], "cancelled");
    assert_eq!(gw.proxy.calls_in_flight(), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_task_that_waits_for_input_cancels_its_upstream_call() {
    // A `task` tool's call is parked with its task known; an `auto` tool's
    // question makes the task, so its call is parked before its task id is
    // known, and found when the task ends.
    for policy in [
        TaskPolicy::Task,
        TaskPolicy::Auto {
            within: Duration::from_secs(20),
        },
    ] {
        let (_dir, file) = events_file();
        let Some(up) = python(&file) else { return };
        let gw = Gateway::start(up, &[("confirm_delete", policy)]).await;
        let r = gw
            .call("confirm_delete", json!({ "filename": "b.txt" }))
            .await;
        let task = r["taskId"].as_str().unwrap().to_owned();
        gw.status(&task, "input_required").await;
        assert_eq!(gw.proxy.calls_in_flight(), (1, 1));
        gw.send26("tasks/cancel", json!({ "taskId": task }), true)
            .await;
        for _ in 0..600 {
            if gw.proxy.calls_in_flight() == (0, 0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            gw.proxy.calls_in_flight(),
            (0, 0),
            "{policy:?}: the parked call is forgotten"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_killed_mid_call_fails_the_task_and_the_next_call_works() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(
        up,
        &[
            ("slow_compute", TaskPolicy::Task),
            ("pid", TaskPolicy::Sync),
        ],
    )
    .await;
    let pid = text(&gw.call("pid", json!({})).await).to_owned();
    let r = gw
        .call("slow_compute", json!({ "seconds": 60, "label": "k" }))
        .await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    event(&file, "started slow_compute").await;
    kill(&pid);
    let t = gw.status(&task, "failed").await;
    let message = t["error"]["message"].as_str().unwrap();
    assert!(message.contains("upstream"), "{message}");
    // Restarted with backoff: the next call reaches a new child.
    let again = text(&gw.call("pid", json!({})).await).to_owned();
    assert!(!again.is_empty() && again != pid, "{again} after {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_within_the_auto_budget_makes_a_task_at_once_or_a_plain_mrtr_round() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let budget = TaskPolicy::Auto {
        within: Duration::from_secs(20),
    };
    let gw = Gateway::start(up, &[("confirm_delete", budget)]).await;

    // With the tasks extension: a task now (not after 20 s), whose first
    // input request is the question.
    let r = gw
        .call("confirm_delete", json!({ "filename": "c.txt" }))
        .await;
    assert_eq!(r["resultType"], "task", "{r}");
    let task = r["taskId"].as_str().unwrap().to_owned();
    let t = gw.status(&task, "input_required").await;
    assert_eq!(t["inputRequests"].as_object().unwrap().len(), 1);

    // Without it (R3): a plain MRTR round whose requestState names the
    // waiting upstream call; the client sends the answer with it.
    let r = gw
        .send26(
            "tools/call",
            json!({ "name": "confirm_delete", "arguments": { "filename": "d.txt" } }),
            false,
        )
        .await;
    let round = common::ok(&r).clone();
    assert_eq!(round["resultType"], "input_required", "{round}");
    let state = round["requestState"].as_str().unwrap().to_owned();
    let key = crate::harness::first_question(&round);
    let answer = json!({ "name": "confirm_delete", "arguments": { "filename": "d.txt" },
        "inputResponses": { &key: { "action": "accept", "content": { "confirm": true } } },
        "requestState": state });

    // Another caller cannot answer (or learn of) alice's waiting call.
    let mallory = gw.as_owner("mallory");
    let stolen = mallory.send26("tools/call", answer.clone(), false).await;
    assert_eq!(common::err(&stolen).code, -32602);

    let done = gw.send26("tools/call", answer, false).await;
    assert_eq!(text(common::ok(&done)), "Deleted d.txt.");
    assert_eq!(
        events(&file)
            .iter()
            .filter(|l| *l == "started confirm_delete")
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_gets_the_same_tasks() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("long", AUTO), ("greet", TaskPolicy::Sync)]).await;
    let init = gw
        .send(
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
        )
        .await;
    let init = common::ok(&init);
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert!(init["capabilities"]["tasks"].is_object(), "{init}");
    let tools = gw.send("tools/list", json!({})).await;
    let tools = common::ok(&tools)["tools"].as_array().unwrap().clone();
    let support = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["execution"]["taskSupport"].clone()
    };
    assert_eq!(support("long"), "optional");
    assert_eq!(support("greet"), "forbidden");

    let created = gw
        .send("tools/call", json!({ "name": "long", "arguments": { "seconds": 1, "steps": 2 }, "task": { "ttl": 60000 } }))
        .await;
    let task = common::ok(&created)["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = gw.send("tasks/result", json!({ "taskId": task })).await;
    assert_eq!(text(common::ok(&result)), "done after 2 steps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_calls_asking_at_once_each_get_their_own_answer() {
    // Over stdio a question says nothing of its call: each call runs in a
    // process of its own. Without that, the second question was refused
    // ("cannot tell which of the 4 calls in flight asked").
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(
        up,
        &[
            ("confirm_delete", TaskPolicy::Task),
            ("long", TaskPolicy::Task),
        ],
    )
    .await;
    calls_asking_at_once_get_their_own_answers(&gw, &file).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_cancel_of_a_synchronous_call_reaches_the_upstream() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("slow_compute", TaskPolicy::Sync)]).await;
    // A 2025-11-25 call that is no task: the client's cancel is the only
    // way to stop it.
    let call = {
        let gw = gw.as_owner("alice");
        tokio::spawn(async move {
            gw.send_with_id(
                77,
                "tools/call",
                json!({ "name": "slow_compute", "arguments": { "seconds": 60, "label": "sync" } }),
            )
            .await
        })
    };
    event(&file, "started slow_compute").await;
    // Another caller's cancel of the same request id changes nothing.
    gw.as_owner("mallory")
        .notify("notifications/cancelled", json!({ "requestId": 77 }))
        .await;
    assert_eq!(gw.proxy.cancellable_requests(), 1);
    gw.notify(
        "notifications/cancelled",
        json!({ "requestId": 77, "reason": "changed my mind" }),
    )
    .await;
    event(&file, "cancelled sync").await;
    let resp = call.await.unwrap();
    assert!(
        common::err(&resp).message.contains("cancelled"),
        "{:?}",
        common::err(&resp)
    );
    assert_eq!(gw.proxy.cancellable_requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_call_that_is_no_task_is_asked_on_the_clients_own_stream() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(
        up,
        &[
            ("test_tool_with_task", TaskPolicy::Sync),
            ("long", TaskPolicy::Sync),
        ],
    )
    .await;
    let peer = common::peer::TestPeer::default();
    // The upstream's question goes to the client as a real request on its
    // stream (the test peer answers "Grace"), as any proxy relays it.
    let r = gw
        .send_with_peer(
            "tools/call",
            json!({ "name": "test_tool_with_task", "arguments": {} }),
            mcp_task_layer::Peer::new(peer.clone()),
        )
        .await;
    assert_eq!(text(common::ok(&r)), "Hello, Grace! Your task is done.");
    let sent = peer.sent.lock().unwrap().clone();
    assert!(
        sent.iter().any(|(m, _)| m == "elicitation/create"),
        "{sent:?}"
    );
    // The client's own progress token gets the upstream's progress.
    let r = gw
        .send_with_peer(
            "tools/call",
            json!({ "name": "long", "arguments": { "seconds": 1, "steps": 2 }, "_meta": { "progressToken": "mine" } }),
            mcp_task_layer::Peer::new(peer.clone()),
        )
        .await;
    assert_eq!(text(common::ok(&r)), "done after 2 steps");
    let progress: Vec<_> = peer
        .sent
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "notifications/progress")
        .map(|(_, p)| p["progressToken"].clone())
        .collect();
    assert!(
        !progress.is_empty() && progress.iter().all(|t| t == "mine"),
        "{progress:?}"
    );
}

/// A long call running, then two `confirm_delete` calls asking at once:
/// each question reaches its client (its own file), each answer its own
/// call (b declined, a accepted), and the long call ends as it would alone.
/// Over stdio each runs in a process of its own; over HTTP each question
/// comes on its call's stream.
pub(crate) async fn calls_asking_at_once_get_their_own_answers(
    gw: &Gateway,
    file: &std::path::Path,
) {
    let r = gw.call("long", json!({ "seconds": 2, "steps": 2 })).await;
    let long = r["taskId"].as_str().unwrap().to_owned();
    let a = gw
        .call("confirm_delete", json!({ "filename": "a.txt" }))
        .await;
    let b = gw
        .call("confirm_delete", json!({ "filename": "b.txt" }))
        .await;
    let (a, b) = (
        a["taskId"].as_str().unwrap().to_owned(),
        b["taskId"].as_str().unwrap().to_owned(),
    );
    let question = |t: &serde_json::Value| {
        let (k, v) = t["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        (k.clone(), v["params"]["message"].clone())
    };
    let (ka, ma) = question(&gw.status(&a, "input_required").await);
    let (kb, mb) = question(&gw.status(&b, "input_required").await);
    assert_eq!(ma, "Delete a.txt?");
    assert_eq!(mb, "Delete b.txt?");
    gw.send26(
        "tasks/update",
        json!({ "taskId": b, "inputResponses": { kb: { "action": "decline" } } }),
        true,
    )
    .await;
    gw.send26("tasks/update", json!({ "taskId": a, "inputResponses": { ka: { "action": "accept", "content": { "confirm": true } } } }), true).await;
    assert_eq!(
        text(&gw.status(&a, "completed").await["result"]),
        "Deleted a.txt."
    );
    assert_ne!(
        text(&gw.status(&b, "completed").await["result"]),
        "Deleted b.txt."
    );
    let t = gw.status(&long, "completed").await;
    assert_eq!(text(&t["result"]), "done after 2 steps");
    let started = events(file)
        .iter()
        .filter(|l| *l == "started confirm_delete")
        .count();
    assert_eq!(started, 2);
}

/// A question the upstream asks during a request that is no tool call
/// (`prompts/get`) reaches a 2026-07-28 client as an MRTR round, and its
/// retry with the answer continues the same upstream request (before, the
/// question was refused and the prompt got the refusal's outcome).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_during_a_prompt_is_an_mrtr_round_that_continues_the_same_request() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[]).await;
    let r = gw
        .send26("prompts/get", json!({ "name": "greeting" }), false)
        .await;
    let round = common::ok(&r).clone();
    assert_eq!(round["resultType"], "input_required", "{round}");
    let requests = round["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{round}");
    let (key, question) = requests.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create");
    let state = round["requestState"].as_str().unwrap();

    // Another owner cannot continue it.
    let stolen = gw
        .as_owner("mallory")
        .send26(
            "prompts/get",
            json!({ "name": "greeting", "requestState": state, "inputResponses": {} }),
            false,
        )
        .await;
    assert_eq!(stolen.error_value().map(|e| e.code), Some(-32602));

    let r = gw
        .send26(
            "prompts/get",
            json!({
                "name": "greeting",
                "requestState": state,
                "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } },
            }),
            false,
        )
        .await;
    let done = common::ok(&r);
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(
        done["messages"][0]["content"]["text"], "Good day.",
        "{done}"
    );
    let started = events(&file)
        .iter()
        .filter(|l| *l == "started greeting")
        .count();
    assert_eq!(started, 1, "one upstream request: {:?}", events(&file));
}
