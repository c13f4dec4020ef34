//! A handler stopped after the cancel grace, `notifications/cancelled`, TTLs
//! and owners (R46–R51).

use super::*;

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
