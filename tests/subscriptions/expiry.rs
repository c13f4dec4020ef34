//! A watched task that expires or is answered in part: what the subscriber
//! is told, and when its subscription ends.

use super::*;

/// Subscribe `c` (alice) to `ids`: the notifications and the pending
/// answer, after checking the acknowledgement.
fn listen_to(c: &Client, ids: &[&str]) -> (Notifications, Pending) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut req = listen_request(9, ids, true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    (rx, tokio::spawn(c.svc.clone().oneshot(req)))
}

async fn acknowledged(rx: &mut Notifications, ids: &[&str]) {
    let (method, ack) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(ack["notifications"]["taskIds"], json!(ids));
}

/// Defect 9, in memory and paused time: a watched task whose TTL runs out
/// ends the stream then (it is gone: nothing more to push), although
/// nothing writes it and the next re-read is 20 minutes away. Before the
/// fix the stream stayed open until that re-read.
#[tokio::test(start_paused = true)]
async fn r48_a_watched_task_that_expires_ends_the_subscription_at_its_ttl() {
    let layer = common::layer()
        .with_default_ttl(Some(Duration::from_secs(2)))
        .with_lease_ttl(Duration::from_secs(3_600));
    let mut c = Client::new(layer);
    c.owner = Some("alice".into());
    let id = c.start("hang", json!({})).await;
    let started = tokio::time::Instant::now();
    let (mut rx, listening) = listen_to(&c, &[&id]);
    acknowledged(&mut rx, &[&id]).await;
    let done = tokio::time::timeout(Duration::from_secs(60), listening)
        .await
        .expect("the stream ends when the task expires")
        .unwrap()
        .unwrap();
    assert_eq!(ok(&done), &json!({"resultType": "complete"}));
    assert!(
        started.elapsed() <= Duration::from_secs(2),
        "ended {:?} after the subscription, past the TTL",
        started.elapsed()
    );
    assert!(rx.try_recv().is_err(), "nothing pushed for a purged task");
    assert_eq!(err(&c.get(&id).await).code, -32602, "R48: gone");
}

/// R34, R56: a partial answer leaves the task `input_required` and, in the
/// same millisecond, its `lastUpdatedAt` as it was; it is pushed all the
/// same, with only the keys still outstanding. Before the fix the stream
/// took it for a lease renewal and pushed nothing.
#[tokio::test(start_paused = true)]
async fn r34_r56_a_partial_answer_is_pushed_with_the_keys_left() {
    let mut c = Client::new(common::layer());
    c.owner = Some("alice".into());
    let id = c.start("ask2", json!({})).await;
    let asked = c.wait_for(&id, TaskStatus::InputRequired).await;
    let (mut rx, listening) = listen_to(&c, &[&id]);
    acknowledged(&mut rx, &[&id]).await;
    ok(&c.update(&id, json!({"a": accept("v", "1")})).await);
    let (method, params) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("the partial answer is pushed")
        .unwrap();
    assert_eq!(method, "notifications/tasks");
    assert_eq!(params["status"], "input_required");
    assert_eq!(params["lastUpdatedAt"], asked["lastUpdatedAt"], "same ms");
    let keys: Vec<_> = params["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["b"], "only the key left");
    ok(&c.update(&id, json!({"b": accept("v", "2")})).await);
    let mut statuses = Vec::new();
    while let Some((_, params)) = rx.recv().await {
        statuses.push(params["status"].as_str().unwrap().to_owned());
    }
    assert_eq!(statuses, ["working", "completed"]);
    assert_eq!(
        ok(&listening.await.unwrap().unwrap())["resultType"],
        "complete"
    );
}

/// Defect 9 on a store with a change feed: reaping is a delete, which no
/// change feed reports, and with a feed nothing re-reads on a timer; still,
/// when the TTL of a watched task runs out the stream ends, and a blocked
/// 2025-11-25 `tasks/result` answers `-32602` (R50). Before the fix the
/// stream never ended. Run on PostgreSQL and on Redis below.
#[cfg(any(feature = "postgres", feature = "redis"))]
async fn r50_expiry_ends_a_subscription_and_a_blocked_result(
    store: impl mcp_task_layer::TaskStore,
) {
    let layer = common::layer_on(store).with_default_ttl(Some(Duration::from_secs(1)));
    let mut c = Client::new(layer);
    c.owner = Some("alice".into());
    let watched = c.start("hang", json!({})).await;
    let legacy = c
        .send(
            "tools/call",
            json!({"name": "hang", "arguments": {}, "task": {"ttl": 1_000}}),
        )
        .await;
    let legacy = ok(&legacy)["task"]["taskId"].as_str().unwrap().to_owned();
    let (mut rx, listening) = listen_to(&c, &[&watched]);
    acknowledged(&mut rx, &[&watched]).await;
    let mut result = JsonRpcRequest::new(50, "tasks/result", json!({"taskId": legacy}));
    result.extensions.insert(TaskOwner::new("alice"));
    let result = tokio::spawn(c.svc.clone().oneshot(result));
    let done = tokio::time::timeout(Duration::from_secs(15), listening)
        .await
        .expect("the stream ends when the task expires")
        .unwrap()
        .unwrap();
    assert_eq!(ok(&done), &json!({"resultType": "complete"}));
    let result = tokio::time::timeout(Duration::from_secs(15), result)
        .await
        .expect("tasks/result answers when the task expires")
        .unwrap()
        .unwrap();
    assert_eq!(err(&result).code, -32602, "R50");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r50_on_postgres_expiry_ends_a_subscription_and_a_blocked_result() {
    use common::pg::{url, Tables};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "subexp");
    r50_expiry_ends_a_subscription_and_a_blocked_result(tables.store(&tables.next()).await).await;
    tables.drop_all().await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r50_on_redis_expiry_ends_a_subscription_and_a_blocked_result() {
    use common::redis_db::{url, Prefixes};

    let Some(url) = url() else { return };
    let prefixes = Prefixes::new(&url, "subexp");
    r50_expiry_ends_a_subscription_and_a_blocked_result(prefixes.store(&prefixes.next()).await)
        .await;
    prefixes.drop_all().await;
}
