//! Input bounds: precise -32602 errors that change nothing, and the
//! per-owner bound on unfinished tasks.

use super::*;

fn limits() -> Limits {
    Limits {
        max_input_responses: 4,
        max_input_responses_bytes: 2_000,
        max_input_depth: 8,
        max_arguments_bytes: 1_000,
        max_result_bytes: 300,
        ..Limits::default()
    }
}

#[tokio::test(start_paused = true)]
async fn input_bounds_are_precise_32602_and_change_nothing() {
    let mut c = Client::new(common::layer().with_limits(limits()));
    let id = c.start("ask", json!({})).await;
    let before = c.wait_for(&id, TaskStatus::InputRequired).await;
    let mut deep = json!("x");
    for _ in 0..20 {
        deep = json!({ "d": deep });
    }
    let many: serde_json::Map<String, Value> =
        (0..5).map(|i| (format!("k{i}"), json!({}))).collect();
    let cases = [
        (Value::Object(many), "at most 4"),
        (
            json!({"name": {"action": "accept", "content": {"name": "x".repeat(3_000)}}}),
            "larger than 2000 bytes",
        ),
        (json!({"name": deep}), "deeper than 8"),
        (json!({"name": [1, 2]}), "must be an object"),
    ];
    for (answers, message) in cases {
        let r = c.update(&id, answers).await;
        let e = err(&r);
        assert_eq!(e.code, -32602);
        assert!(
            e.message.contains(message),
            "{} should say {message}",
            e.message
        );
        assert_eq!(
            c.get_ok(&id).await,
            before,
            "a refused update changes nothing"
        );
    }
    ok(&c.update(&id, json!({"name": accept("name", "Ada")})).await);
    c.wait_for(&id, TaskStatus::Completed).await;
}

#[tokio::test(start_paused = true)]
async fn oversized_arguments_are_refused_before_the_handler_runs() {
    let c = Client::new(common::layer().with_limits(limits()));
    let r = c.call("hang", json!({"blob": "x".repeat(2_000)})).await;
    assert_eq!(err(&r).code, -32602);
    assert!(err(&r).message.contains("larger than 1000 bytes"));
    assert_eq!(c.seen.calls("hang"), 0);
    // Synchronous tools are not stored, so they are not bounded here.
    let r = c.call("echo", json!({"text": "y".repeat(2_000)})).await;
    assert_eq!(ok(&r)["resultType"], "complete");
}

#[tokio::test(start_paused = true)]
async fn an_oversized_result_fails_the_task() {
    let mut c = Client::new(common::layer().with_limits(limits()));
    let id = c
        .start("slow", json!({"ms": 200, "pad": "z".repeat(10)}))
        .await;
    let body = c.wait_for(&id, TaskStatus::Completed).await;
    assert!(body["result"].is_object(), "a small result is stored");
    let mut c = Client::new(common::layer().with_limits(Limits {
        max_result_bytes: 10,
        ..limits()
    }));
    let id = c.start("slow", json!({"ms": 200})).await;
    let body = c.wait_for(&id, TaskStatus::Failed).await;
    assert_eq!(body["error"]["code"], -32603);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("larger than 10 bytes"));
}

#[tokio::test(start_paused = true)]
async fn unfinished_tasks_per_owner_are_bounded() {
    let mut c = Client::new(common::layer().with_limits(Limits {
        max_tasks_per_owner: 2,
        ..limits()
    }));
    c.owner = Some("alice".into());
    let bob = c.as_owner("bob");
    let first = c.start("hang", json!({})).await;
    c.start("ask", json!({})).await;
    let r = c.call("hang", json!({})).await;
    assert_eq!(err(&r).code, -32602);
    assert!(err(&r).message.contains("at most 2"), "{}", err(&r).message);
    assert_eq!(c.seen.calls("hang"), 1, "the refused call never ran");
    // Another owner is not affected; a finished task frees a slot.
    bob.start("hang", json!({})).await;
    ok(&c.cancel(&first).await);
    c.wait_for(&first, TaskStatus::Cancelled).await;
    c.start("hang", json!({})).await;
}
