//! Replicas: a subscriber on one layer follows a task that runs on another,
//! through the store's change feed or, without one, by reading the store.

use super::*;

/// A replica of alice's with its own layer over `store`.
fn replica(store: impl mcp_task_layer::TaskStore, lease_ttl: Duration) -> Client {
    let mut c = Client::new(common::layer_on(store).with_lease_ttl(lease_ttl));
    c.owner = Some("alice".into());
    c
}

/// Start `ask` on `a` (working `delay_ms` before each answer) and subscribe
/// to it on `b`: the task id, the notifications and the pending answer to
/// `subscriptions/listen`.
async fn ask_on_a_listen_on_b(
    a: &Client,
    b: &Client,
    delay_ms: u64,
) -> (String, Notifications, Pending) {
    let id = a.start("ask", json!({"delay_ms": delay_ms})).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = listen_request(9, &[&id], true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    let listening = tokio::spawn(b.svc.clone().oneshot(req));
    let (method, ack) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(ack["notifications"]["taskIds"], json!([id]));
    (id, rx, listening)
}

/// Follow the task's notifications to `completed`, answering its question
/// on `a` (the replica running it); the statuses pushed, in order. Each
/// notification must come within 20 s of tokio time.
async fn follow_to_completion(a: &Client, id: &str, rx: &mut Notifications) -> Vec<String> {
    let mut statuses = Vec::new();
    loop {
        let (method, params) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a notification within 20 s")
            .expect("the stream stays open");
        assert_eq!(method, "notifications/tasks", "R57");
        assert_eq!(params["taskId"], json!(id));
        let status = params["status"].as_str().unwrap().to_owned();
        if status == "input_required" {
            assert!(params["inputRequests"]["name"].is_object(), "{params}");
            ok(&a.update(id, json!({"name": accept("name", "Ada")})).await);
        }
        let done = status == "completed";
        statuses.push(status);
        if done {
            assert_eq!(params["result"]["content"][0]["text"], "Hello, Ada!");
            return statuses;
        }
    }
}

/// A subscriber on one replica sees every change of a task that runs on
/// another, through the store's change feed (issue 9): the body, run on
/// PostgreSQL and on Redis below.
#[cfg(any(feature = "postgres", feature = "redis"))]
async fn a_subscriber_on_b_sees_a_task_running_on_a(
    store_a: impl mcp_task_layer::TaskStore,
    store_b: impl mcp_task_layer::TaskStore,
) {
    // A 30 s lease: the heartbeat cannot be what brings the changes over.
    let lease = Duration::from_secs(30);
    let (a, b) = (replica(store_a, lease), replica(store_b, lease));
    let (id, mut rx, listening) = ask_on_a_listen_on_b(&a, &b, 800).await;
    let statuses = follow_to_completion(&a, &id, &mut rx).await;
    assert_eq!(statuses, ["input_required", "working", "completed"]);
    let done = listening.await.unwrap().unwrap();
    assert_eq!(ok(&done), &json!({"resultType": "complete"}));
    assert_eq!(b.seen.calls("ask"), 0, "everything ran on a");
}

/// Through PostgreSQL's `LISTEN`/`NOTIFY`.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_replica_sees_a_task_running_on_another() {
    use common::pg::{url, Tables};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "subrep");
    let table = tables.next();
    let (store_a, store_b) = tokio::join!(tables.store(&table), tables.store(&table));
    a_subscriber_on_b_sees_a_task_running_on_a(store_a, store_b).await;
    tables.drop_all().await;
}

/// Through Redis pub/sub.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_replica_sees_a_task_running_on_another_over_redis() {
    use common::redis_db::{url, Prefixes};

    let Some(url) = url() else { return };
    let prefixes = Prefixes::new(&url, "subrep");
    let prefix = prefixes.next();
    let (store_a, store_b) = tokio::join!(prefixes.store(&prefix), prefixes.store(&prefix));
    a_subscriber_on_b_sees_a_task_running_on_a(store_a, store_b).await;
    prefixes.drop_all().await;
}

/// The change feed's connection is killed while a subscriber waits: the
/// feed reconnects, the subscriber re-reads, and still sees the task through
/// to its end.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_survives_the_change_feed_losing_its_connection() {
    use common::pg::{url, Tables};
    use mcp_task_layer::store::{PostgresStore, SqlOptions};
    use sqlx::{Connection, Row};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "subdrop");
    let table = tables.next();
    let store_a = tables.store(&table).await;
    let app = format!("{}_b", tables.prefix);
    let sep = if url.contains('?') { '&' } else { '?' };
    let store_b = PostgresStore::connect_with(
        &format!("{url}{sep}application_name={app}"),
        SqlOptions::new().with_table(table.clone()).unwrap(),
    )
    .await
    .unwrap();
    let lease = Duration::from_secs(30);
    let (a, b) = (replica(store_a, lease), replica(store_b, lease));
    let (id, mut rx, listening) = ask_on_a_listen_on_b(&a, &b, 500).await;
    // End b's LISTEN connection (and only it: b's other connections stay).
    // b subscribes to the feed in the background on its first request:
    // the connection is looked for until it is there (bounded).
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut killed: i64 = 0;
    for _ in 0..200 {
        killed = sqlx::query(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
        )
        .bind(&app)
        .fetch_one(&mut admin)
        .await
        .unwrap()
        .get(0);
        if killed > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(killed, 1, "b's feed connection was found");
    // What was written while the feed was down may be seen only as the
    // state read after it came back.
    let statuses = follow_to_completion(&a, &id, &mut rx).await;
    assert_eq!(statuses.first().map(String::as_str), Some("input_required"));
    let done = listening.await.unwrap().unwrap();
    assert_eq!(ok(&done)["resultType"], "complete");
    tables.drop_all().await;
}

/// Without a change feed (two layers over one `MemoryStore`, as two
/// processes over one SQLite file would be), a subscriber on one still sees
/// every status of a task running on the other, by re-reading every third
/// of the lease TTL.
#[tokio::test(start_paused = true)]
async fn without_a_change_feed_a_subscriber_on_another_layer_still_follows_the_task() {
    let store = mcp_task_layer::MemoryStore::new();
    let lease = Duration::from_secs(3);
    let (a, b) = (replica(store.clone(), lease), replica(store, lease));
    // Each step takes 5 s, longer than a re-read period (1 s).
    let (id, mut rx, listening) = ask_on_a_listen_on_b(&a, &b, 5_000).await;
    let statuses = follow_to_completion(&a, &id, &mut rx).await;
    assert_eq!(statuses, ["input_required", "working", "completed"]);
    let done = listening.await.unwrap().unwrap();
    assert_eq!(ok(&done)["resultType"], "complete");
    assert_eq!(b.seen.calls("ask"), 0, "it ran on a");
}
