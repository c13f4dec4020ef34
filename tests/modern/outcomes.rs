//! R18–R45: input rounds, results and errors, `tasks/update` and `tasks/cancel`.

use super::*;

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
