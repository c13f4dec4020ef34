//! MRTR before the task exists, the `auto` policy's budget, and how a
//! handler is re-invoked with every answer exactly once.

use super::*;

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
