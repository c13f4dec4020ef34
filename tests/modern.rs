//! The 2026-07-28 tasks extension on the wire, one test per requirement of
//! `docs/requirements.md` (R-numbers in the names).

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{accept, err, meta, ok, Client};
use mcp_task_layer::{TaskLayer, TaskPolicy, TaskStatus};
use serde_json::{json, Value};

fn layer() -> TaskLayer {
    common::layer()
}

const TASK_FIELDS_FORBIDDEN_ON_CREATE: [&str; 7] = [
    "task",
    "result",
    "error",
    "inputRequests",
    "requestState",
    "ttl",
    "pollInterval",
];

#[tokio::test(start_paused = true)]
async fn r01_r09_discover_advertises_the_extension_and_not_legacy_tasks() {
    let c = Client::new(layer());
    let r = c.send26("server/discover", json!({}), false).await;
    let caps = &ok(&r)["capabilities"];
    assert_eq!(
        caps["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "R1"
    );
    assert!(
        caps.get("tasks").is_none(),
        "R9: no legacy capabilities.tasks"
    );
    assert_eq!(
        caps["tools"],
        json!({}),
        "the inner server's capabilities stay"
    );
}

#[tokio::test(start_paused = true)]
async fn r02_r07_no_task_without_the_capability_even_with_a_legacy_task_param() {
    let c = Client::new(layer());
    // Earlier requests that declared the capability change nothing (R2).
    c.start("slow", json!({"ms": 5000})).await;
    let r = c
        .send26(
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 5000}, "task": {"ttl": 60000}}),
            false,
        )
        .await;
    let body = ok(&r);
    assert_eq!(body["resultType"], "complete", "R2/R7: runs synchronously");
    assert!(body.get("taskId").is_none());
    assert_eq!(body["content"][0]["text"], "slept 5000");
}

#[tokio::test(start_paused = true)]
async fn r03_task_only_tool_without_capability_is_32021_with_required_capabilities() {
    let c = Client::new(layer());
    let r = c
        .send26(
            "tools/call",
            json!({"name": "hang", "arguments": {}}),
            false,
        )
        .await;
    let e = err(&r);
    assert_eq!(e.code, -32021);
    assert_eq!(
        e.data.as_ref().unwrap()["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    assert_eq!(c.seen.calls("hang"), 0, "the handler never ran");
}

#[tokio::test(start_paused = true)]
async fn r04_r28_create_task_result_is_flat_and_working() {
    let c = Client::new(layer());
    let r = c.call("hang", json!({})).await;
    let body = ok(&r);
    assert_eq!(body["resultType"], "task");
    assert_eq!(body["status"], "working", "R28");
    assert!(body["taskId"].is_string());
    for f in ["createdAt", "lastUpdatedAt"] {
        let t = body[f].as_str().unwrap();
        assert!(
            t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
            "{f} RFC 3339: {t}"
        );
    }
    assert_eq!(body["ttlMs"], json!(3_600_000));
    assert_eq!(body["pollIntervalMs"], json!(1000));
    for f in TASK_FIELDS_FORBIDDEN_ON_CREATE {
        assert!(body.get(f).is_none(), "{f} must not be on CreateTaskResult");
    }
}

#[tokio::test(start_paused = true)]
async fn r05_r14_only_create_task_result_carries_result_type_task() {
    let mut c = Client::new(layer());
    let id = c.start("ask", json!({})).await;
    let got = c.wait_for(&id, TaskStatus::InputRequired).await;
    assert_eq!(got["resultType"], "complete", "R14");
    let upd = c.update(&id, json!({"name": accept("name", "Ada")})).await;
    assert_eq!(ok(&upd)["resultType"], "complete");
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["resultType"], "complete");
    assert_eq!(ok(&c.cancel(&id).await)["resultType"], "complete");
    let sync = c.call("echo", json!({"text": "x"})).await;
    assert_eq!(
        ok(&sync)["resultType"],
        "complete",
        "R5: plain results stay complete"
    );
}

#[tokio::test(start_paused = true)]
async fn r06_get_right_after_create_succeeds() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    assert_eq!(c.get_ok(&id).await["status"], "working");
}

#[tokio::test(start_paused = true)]
async fn r08_legacy_tasks_capability_alone_counts_as_non_declaring() {
    let c = Client::new(layer());
    let mut m = meta(false);
    m["io.modelcontextprotocol/clientCapabilities"]["tasks"] =
        json!({"requests": {"tools": {"call": {}}}});
    let r = c
        .send(
            "tools/call",
            json!({"name": "hang", "arguments": {}, "_meta": m.clone()}),
        )
        .await;
    assert_eq!(err(&r).code, -32021, "R8 → R3");
    let r = c
        .send("tasks/get", json!({"taskId": "x", "_meta": m}))
        .await;
    assert_eq!(err(&r).code, -32021, "R8 → R16");
}

#[tokio::test(start_paused = true)]
async fn r10_r11_tasks_result_and_list_are_method_not_found() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    let r = c.send26("tasks/result", json!({"taskId": id}), true).await;
    assert_eq!(err(&r).code, -32601, "R10");
    let r = c.send26("tasks/list", json!({}), true).await;
    assert_eq!(err(&r).code, -32601, "R11");
}

#[tokio::test(start_paused = true)]
async fn r12_other_methods_pass_through_untouched() {
    let c = Client::new(layer().with_default_policy(TaskPolicy::Task));
    let r = c.send26("ping", json!({}), true).await;
    assert_eq!(ok(&r), &json!({"resultType": "complete"}));
    let r = c.send26("prompts/get", json!({"name": "p"}), true).await;
    assert_eq!(err(&r).code, -32601, "the inner server's own answer");
}

#[tokio::test(start_paused = true)]
async fn r13_r53_ids_are_unique_random_128_bit() {
    let c = Client::new(layer().with_default_ttl(Some(Duration::from_secs(60))));
    let mut ids = HashSet::new();
    for _ in 0..10_000 {
        let id = c.start("tool_error", json!({})).await;
        assert_eq!(id.len(), 32, "R53: 128 bits as hex");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(ids.insert(id), "R13: unique");
    }
    // Not sequential: no two ids share a 64-bit prefix.
    let prefixes: HashSet<_> = ids.iter().map(|i| i[..16].to_owned()).collect();
    assert_eq!(prefixes.len(), ids.len());
}

#[tokio::test(start_paused = true)]
async fn r15_r31_r42_unknown_task_is_32602_everywhere() {
    let c = Client::new(layer());
    for r in [
        c.get("nope").await,
        c.update("nope", json!({"a": accept("v", "x")})).await,
        c.cancel("nope").await,
    ] {
        assert_eq!(err(&r).code, -32602);
        assert_eq!(err(&r).message, "Failed to retrieve task: Task not found");
    }
}

#[tokio::test(start_paused = true)]
async fn r16_r32_r43_tasks_methods_without_capability_are_32021() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let r = c
            .send26(method, json!({"taskId": id, "inputResponses": {}}), false)
            .await;
        let e = err(&r);
        assert_eq!(e.code, -32021, "{method}");
        assert_eq!(
            e.data.as_ref().unwrap()["requiredCapabilities"]["extensions"]
                ["io.modelcontextprotocol/tasks"],
            json!({})
        );
    }
    assert_eq!(
        c.get_ok(&id).await["status"],
        "working",
        "a refused cancel changes nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn r17_working_task_has_no_payload() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    let body = c.get_ok(&id).await;
    assert_eq!(body["status"], "working");
    for f in ["result", "error", "inputRequests"] {
        assert!(body.get(f).is_none(), "R17: {f}");
    }
}

#[tokio::test(start_paused = true)]
async fn r18_r25_input_required_lists_every_request_and_repeats_it() {
    let mut c = Client::new(layer());
    let id = c.start("ask2", json!({})).await;
    let first = c.wait_for(&id, TaskStatus::InputRequired).await;
    let reqs = first["inputRequests"].as_object().unwrap();
    assert_eq!(reqs.keys().collect::<Vec<_>>(), ["a", "b"], "R18");
    for v in reqs.values() {
        assert_eq!(v["method"], "elicitation/create");
        assert!(v.get("jsonrpc").is_none() && v.get("id").is_none());
    }
    let again = c.get_ok(&id).await;
    assert_eq!(first, again, "R25 and R24: a pure read");
}

#[tokio::test(start_paused = true)]
async fn r19_completed_result_equals_the_synchronous_result() {
    let mut c = Client::new(layer());
    let id = c.start("slow", json!({"ms": 2000})).await;
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    let sync = c
        .send26(
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 2000}}),
            false,
        )
        .await;
    assert_eq!(&done["result"], ok(&sync), "R19");
}

#[tokio::test(start_paused = true)]
async fn r20_r23_inner_jsonrpc_error_fails_the_task_with_that_exact_error() {
    let mut c = Client::new(layer());
    let id = c.start("boom", json!({})).await;
    let body = c.wait_for(&id, TaskStatus::Failed).await;
    assert_eq!(
        body["error"],
        json!({"code": -32050, "message": "upstream exploded", "data": {"retry": false}}),
        "R23"
    );
    assert_eq!(body["statusMessage"], "upstream exploded", "R20");
    assert!(body.get("result").is_none());
}

#[tokio::test(start_paused = true)]
async fn r21_cancelled_task_has_no_result() {
    let mut c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    ok(&c.cancel(&id).await);
    let body = c.wait_for(&id, TaskStatus::Cancelled).await;
    assert!(
        body.get("result").is_none() && body.get("error").is_none(),
        "R21"
    );
}

#[tokio::test(start_paused = true)]
async fn r22_is_error_result_completes_the_task() {
    let mut c = Client::new(layer());
    let id = c.start("tool_error", json!({})).await;
    let body = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(body["result"]["isError"], true, "R22");
}

#[tokio::test(start_paused = true)]
async fn r24_r26_r27_terminal_reads_are_stable_and_timestamps_behave() {
    let mut c = Client::new(layer());
    let id = c.start("slow", json!({"ms": 5000})).await;
    let working = c.get_ok(&id).await;
    tokio::time::advance(Duration::from_millis(10)).await;
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(
        working["createdAt"], done["createdAt"],
        "R27: createdAt constant"
    );
    assert!(
        done["lastUpdatedAt"].as_str() > working["lastUpdatedAt"].as_str(),
        "R27: changes with status"
    );
    assert!(done["lastUpdatedAt"].as_str() >= done["createdAt"].as_str());
    tokio::time::advance(Duration::from_secs(30)).await;
    for _ in 0..3 {
        assert_eq!(c.get_ok(&id).await, done, "R24/R26: terminal and pure");
    }
}

#[tokio::test(start_paused = true)]
async fn r29_r35_status_sequence_uses_allowed_edges() {
    let mut c = Client::new(layer());
    let mut events = c.events.resubscribe();
    let id = c.start("ask", json!({})).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    ok(&c.update(&id, json!({"name": accept("name", "Ada")})).await);
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
    let mut seq = Vec::new();
    while let Ok(e) = events.try_recv() {
        assert_eq!(e.task_id, id);
        seq.push(e.status);
    }
    use TaskStatus::*;
    assert_eq!(seq, [Working, InputRequired, Working, Completed], "R29/R35");
    for w in seq.windows(2) {
        assert!(w[0].can_become(w[1]));
    }
}

#[tokio::test(start_paused = true)]
async fn r30_update_ack_is_exactly_complete() {
    let mut c = Client::new(layer());
    let id = c.start("ask", json!({})).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    let r = c.update(&id, json!({"name": accept("name", "Ada")})).await;
    assert_eq!(ok(&r), &json!({"resultType": "complete"}), "R30");
}

#[tokio::test(start_paused = true)]
async fn r33_unknown_keys_are_acked_and_change_nothing() {
    let mut c = Client::new(layer());
    let id = c.start("ask", json!({})).await;
    let before = c.wait_for(&id, TaskStatus::InputRequired).await;
    let r = c
        .update(&id, json!({"unknown-key": {"ignored": true}}))
        .await;
    assert_eq!(ok(&r), &json!({"resultType": "complete"}));
    assert_eq!(c.get_ok(&id).await, before, "R33: nothing changed");
}

#[tokio::test(start_paused = true)]
async fn r34_partial_answer_keeps_input_required_with_the_rest() {
    let mut c = Client::new(layer());
    let id = c.start("ask2", json!({})).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    ok(&c.update(&id, json!({"a": accept("v", "1")})).await);
    let body = c.get_ok(&id).await;
    assert_eq!(body["status"], "input_required");
    assert_eq!(
        body["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["b"],
        "R34"
    );
    assert_eq!(
        c.seen.calls("ask2"),
        1,
        "no resume before every key is answered"
    );
    ok(&c.update(&id, json!({"b": accept("v", "2")})).await);
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "1+2");
}

#[tokio::test(start_paused = true)]
async fn r36_r37_reasked_inner_key_gets_a_fresh_external_key() {
    let mut c = Client::new(layer());
    let id = c.start("reask", json!({})).await;
    let first = c.wait_for(&id, TaskStatus::InputRequired).await;
    assert_eq!(first["inputRequests"]["a"]["params"]["message"], "first");
    ok(&c.update(&id, json!({"a": accept("v", "one")})).await);
    let mut second;
    loop {
        second = c.wait_for(&id, TaskStatus::InputRequired).await;
        if second["inputRequests"].get("a").is_none() {
            break;
        }
    }
    let keys: Vec<_> = second["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["a.2"], "R36: the answered key `a` never reappears");
    assert_eq!(
        second["inputRequests"]["a.2"]["params"]["message"], "again after one",
        "R37"
    );
    // Answering the old key again is ignored (R33); the new one resumes.
    ok(&c.update(&id, json!({"a": accept("v", "stale")})).await);
    assert_eq!(c.get_ok(&id).await["status"], "input_required");
    ok(&c.update(&id, json!({"a.2": accept("v", "two")})).await);
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    // The handler saw the later answer under its own key `a`.
    assert_eq!(done["result"]["content"][0]["text"], "last=two");
}

#[tokio::test(start_paused = true)]
async fn r38_malformed_update_params_are_32602() {
    let mut c = Client::new(layer());
    let id = c.start("ask", json!({})).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    for params in [
        json!({"inputResponses": {}}),
        json!({"taskId": id}),
        json!({"taskId": id, "inputResponses": []}),
        json!({"taskId": id, "inputResponses": "x"}),
        json!({"taskId": 7, "inputResponses": {}}),
        json!({"taskId": id, "inputResponses": {"name": "not an object"}}),
    ] {
        let r = c.send26("tasks/update", params.clone(), true).await;
        assert_eq!(err(&r).code, -32602, "R38: {params}");
    }
    assert_eq!(c.get_ok(&id).await["status"], "input_required");
}

#[tokio::test(start_paused = true)]
async fn r39_undeclared_input_kinds_fail_the_task() {
    let mut c = Client::new(layer());
    let id = c.start("roots", json!({})).await;
    let body = c.wait_for(&id, TaskStatus::Failed).await;
    assert_eq!(body["error"]["code"], -32021, "R39: roots was not declared");
    assert!(body.get("inputRequests").is_none());
    // Declared kinds pass.
    let id = c.start("sample", json!({})).await;
    let body = c.wait_for(&id, TaskStatus::InputRequired).await;
    assert_eq!(
        body["inputRequests"]["llm"]["method"],
        "sampling/createMessage"
    );
}

#[tokio::test(start_paused = true)]
async fn r40_r45_update_and_cancel_on_terminal_tasks_ack_and_change_nothing() {
    let mut c = Client::new(layer());
    let id = c.start("tool_error", json!({})).await;
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(
        ok(&c.update(&id, json!({"x": accept("v", "1")})).await)["resultType"],
        "complete"
    );
    assert_eq!(
        ok(&c.cancel(&id).await),
        &json!({"resultType": "complete"}),
        "R45"
    );
    assert_eq!(c.get_ok(&id).await, done, "R40/R45: unchanged");
}

#[tokio::test(start_paused = true)]
async fn r41_r44_cancel_stops_the_handler_and_the_task_stays_cancelled() {
    let mut c = Client::new(layer());
    let id = c.start("slow", json!({"ms": 60_000})).await;
    assert_eq!(
        ok(&c.cancel(&id).await),
        &json!({"resultType": "complete"}),
        "R41"
    );
    let body = c.wait_for(&id, TaskStatus::Cancelled).await;
    // The handler saw its token and stopped (it answered "stopped"), yet the
    // task stays cancelled (R44).
    common::eventually(
        || {
            c.seen
                .cancelled_handlers
                .load(std::sync::atomic::Ordering::SeqCst)
                == 1
        },
        "the handler sees its token",
    )
    .await;
    tokio::time::advance(Duration::from_secs(120)).await;
    assert_eq!(c.get_ok(&id).await, body, "R44: never back from terminal");
}

#[tokio::test(start_paused = true)]
async fn cancel_aborts_a_handler_that_ignores_its_token_after_the_grace() {
    use std::sync::atomic::Ordering::SeqCst;
    let mut c = Client::new(layer().with_cancel_grace(Duration::from_secs(2)));
    let id = c.start("hang", json!({"stubborn": true})).await;
    ok(&c.cancel(&id).await);
    c.wait_for(&id, TaskStatus::Cancelled).await;
    let cancelled_at = tokio::time::Instant::now();
    common::eventually(
        || c.seen.aborted_handlers.load(SeqCst) == 1,
        "the handler is aborted",
    )
    .await;
    let waited = cancelled_at.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(3),
        "aborted after the 2 s grace, not before: {waited:?}"
    );
    assert_eq!(c.get_ok(&id).await["status"], "cancelled");
}

#[tokio::test(start_paused = true)]
async fn a_cooperative_handler_is_not_aborted() {
    use std::sync::atomic::Ordering::SeqCst;
    let mut c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    ok(&c.cancel(&id).await);
    c.wait_for(&id, TaskStatus::Cancelled).await;
    common::eventually(
        || c.seen.cancelled_handlers.load(SeqCst) == 1,
        "the handler sees its token",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(c.seen.aborted_handlers.load(SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn r46_notifications_cancelled_does_not_cancel_a_task() {
    let c = Client::new(layer());
    let resp = c.call("hang", json!({})).await;
    let id = ok(&resp)["taskId"].as_str().unwrap().to_owned();
    let note = c
        .send26(
            "notifications/cancelled",
            json!({"requestId": resp.id, "reason": "x"}),
            true,
        )
        .await;
    let _ = note; // the inner server answers; the layer does not act on it
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(c.get_ok(&id).await["status"], "working", "R46");
}

#[tokio::test(start_paused = true)]
async fn r47_every_task_body_has_ttl_ms_even_when_unlimited() {
    let mut c = Client::new(layer().with_default_ttl(None).with_max_ttl(None));
    let id = c.start("ask", json!({})).await;
    let body = c.wait_for(&id, TaskStatus::InputRequired).await;
    assert_eq!(body["ttlMs"], Value::Null, "R47: present and null");
    assert!(body.as_object().unwrap().contains_key("ttlMs"));
}

#[tokio::test(start_paused = true)]
async fn r48_r50_expired_tasks_read_as_unknown_and_are_reaped() {
    let store = mcp_task_layer::MemoryStore::new();
    let c = Client::new(
        common::layer_on(store.clone()).with_default_ttl(Some(Duration::from_secs(10))),
    );
    let id = c.start("ask", json!({})).await;
    let keep = c.start("ask", json!({})).await;
    let _ = keep;
    assert_eq!(c.get_ok(&id).await["ttlMs"], 10_000);
    assert_eq!(store.len(), 2);
    tokio::time::advance(Duration::from_secs(10)).await;
    for r in [
        c.get(&id).await,
        c.cancel(&id).await,
        c.update(&id, json!({"name": accept("name", "x")})).await,
    ] {
        assert_eq!(
            err(&r).message,
            "Failed to retrieve task: Task not found",
            "R48/R50"
        );
    }
    // The reaper (every second) removes them from the store.
    common::eventually(|| store.is_empty(), "the reaper removes expired tasks").await;
}

#[tokio::test(start_paused = true)]
async fn ttl_is_capped_by_the_maximum() {
    let c = Client::new(
        layer()
            .with_default_ttl(Some(Duration::from_secs(600)))
            .with_max_ttl(Some(Duration::from_secs(60))),
    );
    let r = c.call("hang", json!({})).await;
    assert_eq!(ok(&r)["ttlMs"], 60_000);
}

#[tokio::test(start_paused = true)]
async fn r51_another_owners_task_is_indistinguishable_from_unknown() {
    let mut alice = Client::new(layer());
    alice.owner = Some("alice".into());
    let bob = alice.as_owner("bob");
    let id = alice.start("ask", json!({})).await;
    alice.wait_for(&id, TaskStatus::InputRequired).await;
    let unknown = bob.get("does-not-exist").await;
    for r in [
        bob.get(&id).await,
        bob.update(&id, json!({"name": accept("name", "x")})).await,
        bob.cancel(&id).await,
    ] {
        assert_eq!(
            r.into_payload(),
            unknown.clone().into_payload(),
            "R51: identical to unknown"
        );
    }
    assert_eq!(
        alice.get_ok(&id).await["status"],
        "input_required",
        "bob changed nothing"
    );
    let mut anonymous = alice.as_owner("x");
    anonymous.owner = None;
    assert_eq!(
        err(&anonymous.get(&id).await).code,
        -32602,
        "no owner is not a wildcard"
    );
}

#[tokio::test(start_paused = true)]
async fn mrtr_before_the_task_is_plain_mrtr_and_seeds_the_task() {
    // The `ask_now` handler asks at once, so its first round is plain MRTR with
    // no task (design §3); the retry with the answer becomes the task.
    let mut c = Client::new(layer());
    let r = c.call("ask_now", json!({})).await;
    let body = ok(&r);
    assert_eq!(body["resultType"], "input_required");
    assert!(body.get("taskId").is_none());
    let state = body["requestState"].clone();
    let r = c
        .send26(
            "tools/call",
            json!({"name": "ask_now", "arguments": {}, "inputResponses": {"name": accept("name", "Alice")}, "requestState": state}),
            true,
        )
        .await;
    let created = ok(&r);
    assert_eq!(created["resultType"], "task");
    assert!(created.get("requestState").is_none());
    let id = created["taskId"].as_str().unwrap().to_owned();
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Alice!");
}

#[tokio::test(start_paused = true)]
async fn request_state_only_rounds_are_re_invoked_at_once() {
    // `state` answers twice with requestState alone: inside a task the layer
    // re-invokes it at once with that state, and the task never shows it.
    let mut c = Client::new(layer());
    let id = c.start("state", json!({})).await;
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "done after s2");
    assert_eq!(c.seen.calls("state"), 3);
    assert!(done.get("requestState").is_none());
}

#[tokio::test(start_paused = true)]
async fn auto_policy_answers_synchronously_within_budget() {
    let c = Client::new(layer());
    let r = c.call("slow", json!({"ms": 50})).await;
    assert_eq!(ok(&r)["resultType"], "complete");
    assert_eq!(ok(&r)["content"][0]["text"], "slept 50");
    let r = c.call("slow", json!({"ms": 150})).await;
    assert_eq!(ok(&r)["resultType"], "task");
}

#[tokio::test(start_paused = true)]
async fn resumed_handler_gets_original_arguments_all_answers_and_context() {
    let mut c = Client::new(layer());
    let id = c.start("ask2", json!({"keep": [1, 2]})).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    ok(&c.update(&id, json!({"a": accept("v", "1")})).await);
    ok(&c.update(&id, json!({"b": accept("v", "2")})).await);
    c.wait_for(&id, TaskStatus::Completed).await;
    let (params, ctx, token) = c.seen.last("ask2");
    assert_eq!(params["arguments"], json!({"keep": [1, 2]}));
    assert_eq!(
        params["inputResponses"]["a"]["content"]["v"], "1",
        "all accumulated answers"
    );
    assert_eq!(params["inputResponses"]["b"]["content"]["v"], "2");
    assert_eq!(params["_meta"], meta(true), "the original _meta");
    let ctx = ctx.expect("TaskResumeContext in the extensions");
    assert_eq!(ctx.tool_name, "ask2");
    assert_eq!(ctx.arguments, json!({"keep": [1, 2]}));
    assert_eq!(ctx.input_responses.len(), 2);
    assert!(ctx.cancellation_token.is_some());
    assert!(token, "the CancellationToken is in the extensions");
}

#[tokio::test(start_paused = true)]
async fn racing_updates_resume_the_handler_exactly_once() {
    let mut c = Client::new(layer());
    let id = c.start("ask", json!({})).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    assert_eq!(c.seen.calls("ask"), 1);
    let mut joins = Vec::new();
    for i in 0..64 {
        let c2 = c.as_owner("ignored");
        let mut c2 = c2;
        c2.owner = None;
        let id = id.clone();
        joins.push(tokio::spawn(async move {
            c2.update(&id, json!({"name": accept("name", &format!("n{i}"))}))
                .await
        }));
    }
    for j in joins {
        assert_eq!(ok(&j.await.unwrap()), &json!({"resultType": "complete"}));
    }
    c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(
        c.seen.calls("ask"),
        2,
        "one first run and exactly one resume"
    );
}

/// A `Task` tool whose handler answers on its first poll has its task
/// written once, finished; what the client and event listeners see is what
/// two writes gave: the creating answer shows `working` (R28), events go
/// `working` → end with growing versions, and the task reads back finished
/// with the handler's exact result or error (R22, R23).
#[tokio::test(start_paused = true)]
async fn a_handler_answering_at_once_reads_as_working_then_finished() {
    let c = Client::new(layer());
    for (tool, end) in [
        ("tool_error", TaskStatus::Completed),
        ("boom", TaskStatus::Failed),
    ] {
        let mut events = c.events.resubscribe();
        let resp = c.call(tool, json!({})).await;
        let created = ok(&resp);
        assert_eq!(created["resultType"], "task");
        assert_eq!(created["status"], "working", "R28: {tool}");
        let id = created["taskId"].as_str().unwrap().to_owned();
        let mut seq = Vec::new();
        while let Ok(e) = events.try_recv() {
            assert_eq!(e.task_id, id);
            seq.push((e.status, e.version));
        }
        assert_eq!(seq, [(TaskStatus::Working, 1), (end, 2)], "{tool}");
        let body = c.get_ok(&id).await;
        assert_eq!(body["status"], end.as_str());
        assert_eq!(body["createdAt"], created["createdAt"]);
        match end {
            TaskStatus::Completed => assert_eq!(body["result"]["isError"], true, "R22"),
            _ => assert_eq!(
                body["error"],
                json!({"code": -32050, "message": "upstream exploded", "data": {"retry": false}}),
                "R23"
            ),
        }
    }
}

/// Arguments nesting too deeply for a durable store to read back are
/// refused with -32602 before the handler runs; 99 levels are kept and
/// reach a resumed handler unchanged.
#[tokio::test(start_paused = true)]
async fn arguments_too_deep_to_keep_are_refused_before_the_handler_runs() {
    let mut c = Client::new(layer());
    let nest = |levels: usize| {
        let mut v = json!("leaf");
        for _ in 0..levels {
            v = json!([v]);
        }
        v
    };
    let mut events = c.events.resubscribe();
    let resp = c.call("ask", json!({ "deep": nest(120) })).await;
    let e = err(&resp);
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("nests deeper than 100 levels"), "{e:?}");
    assert_eq!(c.seen.calls("ask"), 0, "the handler never ran");
    assert!(events.try_recv().is_err(), "no task was made");

    let kept = json!({ "deep": nest(98) });
    let id = c.start("ask", kept.clone()).await;
    c.wait_for(&id, TaskStatus::InputRequired).await;
    ok(&c.update(&id, json!({"name": accept("name", "Ada")})).await);
    c.wait_for(&id, TaskStatus::Completed).await;
    let (params, resume, _) = c.seen.last("ask");
    assert_eq!(
        params["arguments"], kept,
        "resumed with the arguments unchanged"
    );
    assert_eq!(resume.expect("a resume context").arguments, kept);
}
