//! The operator API seen from outside: an [`Operator`] lists, counts,
//! cancels and purges every owner's tasks, and its cancel stops the running
//! handler wherever it runs, as `tasks/cancel` does; MCP callers still see
//! only their own tasks.
//!
//! The store conformance kit (`tests/stores/`) checks the listing, paging,
//! counting and purging of every store; this file checks what needs a
//! running layer.

mod common;

use std::sync::atomic::Ordering;

use common::*;
use mcp_task_layer::store::{Error, TaskQuery};
use mcp_task_layer::{CancelOutcome, TaskStatus};
use serde_json::json;

fn cancelled_handlers(client: &Client) -> usize {
    client.seen.cancelled_handlers.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_layers_operator_cancels_any_owners_task_and_stops_its_handler() {
    let layer = layer();
    let operator = layer.operator();
    let mut bob = Client::new(layer).as_owner("bob");
    let id = bob.start("hang", json!({})).await;
    let alice = bob.as_owner("alice");
    let refused = alice.cancel(&id).await;
    assert_eq!(
        err(&refused).code,
        -32602,
        "an MCP caller cannot reach another owner's task"
    );
    assert_eq!(
        operator.cancel(&id).await.unwrap(),
        CancelOutcome::Cancelled
    );
    let body = bob.wait_for(&id, TaskStatus::Cancelled).await;
    assert_eq!(
        body["statusMessage"],
        "The task was cancelled by an operator."
    );
    eventually(
        || cancelled_handlers(&bob) == 1,
        "the handler saw the cancel",
    )
    .await;
    assert_eq!(
        operator.cancel(&id).await.unwrap(),
        CancelOutcome::AlreadyEnded(TaskStatus::Cancelled)
    );
    assert!(matches!(
        operator.cancel("nope").await,
        Err(Error::NotFound)
    ));
    assert!(operator.get("nope").await.unwrap().is_none());
}

#[tokio::test]
async fn bulk_cancel_and_purge_touch_what_the_filter_matches() {
    let layer = layer();
    let operator = layer.operator();
    let mut alice = Client::new(layer).as_owner("alice");
    let mut bob = alice.as_owner("bob");
    let a1 = alice.start("hang", json!({"n": 1})).await;
    let a2 = alice.start("ask", json!({})).await;
    alice.wait_for(&a2, TaskStatus::InputRequired).await;
    let b1 = bob.start("hang", json!({"n": 2})).await;

    let working = operator
        .list(&TaskQuery::new().status(TaskStatus::Working))
        .await
        .unwrap();
    let mut owners: Vec<_> = working
        .tasks
        .iter()
        .map(|t| t.owner.clone().unwrap())
        .collect();
    owners.sort();
    assert_eq!(owners, ["alice", "bob"], "every owner's tasks");
    let found = operator
        .list(&TaskQuery::new().search("\"n\":2"))
        .await
        .unwrap();
    assert_eq!(found.tasks.len(), 1);
    assert_eq!(found.tasks[0].id, b1);

    let stats = operator.stats().await.unwrap();
    assert_eq!(stats.count(TaskStatus::Working), 2);
    assert_eq!(stats.count(TaskStatus::InputRequired), 1);
    assert_eq!(
        stats.oldest_input_required.as_ref().map(|w| w.id.as_str()),
        Some(a2.as_str())
    );
    assert_eq!(stats.running_by_holder.values().sum::<u64>(), 2);

    let cancelled = operator
        .cancel_matching(&TaskQuery::new().owner("alice"))
        .await
        .unwrap();
    assert_eq!(cancelled, 2, "alice's working and waiting tasks");
    alice.wait_for(&a1, TaskStatus::Cancelled).await;
    alice.wait_for(&a2, TaskStatus::Cancelled).await;
    assert_eq!(bob.get_ok(&b1).await["status"], "working", "bob's runs on");
    assert_eq!(
        operator.purge_matching(&TaskQuery::new()).await.unwrap(),
        2,
        "the finished tasks, never the working one"
    );
    assert!(operator.get(&a1).await.unwrap().is_none());
    assert!(operator.get(&b1).await.unwrap().is_some());
    assert_eq!(
        operator
            .purge_older_than(std::time::Duration::ZERO)
            .await
            .unwrap(),
        0
    );
    operator.cancel(&b1).await.unwrap();
    bob.wait_for(&b1, TaskStatus::Cancelled).await;
}

/// A store-only operator (what `mcp-tasks cancel` is) on a second
/// connection to the file a layer runs on: the layer's handler stops at
/// its next lease heartbeat (SQLite has no change feed).
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_only_operator_stops_a_handler_in_another_layer_on_sqlite() {
    use mcp_task_layer::store::SqliteStore;

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let runner = layer_on(SqliteStore::connect(&url).await.unwrap())
        .with_lease_ttl(std::time::Duration::from_millis(300));
    let client = Client::new(runner).as_owner("alice");
    let id = client.start("hang", json!({})).await;
    let operator = mcp_task_layer::Operator::new(SqliteStore::connect(&url).await.unwrap());
    assert_eq!(
        operator.cancel(&id).await.unwrap(),
        CancelOutcome::Cancelled
    );
    eventually(|| cancelled_handlers(&client) == 1, "the handler stopped").await;
    assert_eq!(client.get_ok(&id).await["status"], "cancelled");
}

/// The same on PostgreSQL, whose change feed carries the cancel: the lease
/// is ten minutes long, so no heartbeat comes within the test's bound.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_only_operator_stops_a_handler_in_another_layer_on_postgres() {
    let Some(url) = common::pg::url() else { return };
    let tables = common::pg::Tables::new(&url, "operator");
    let table = tables.next();
    let runner =
        layer_on(tables.store(&table).await).with_lease_ttl(std::time::Duration::from_secs(600));
    let mut client = Client::new(runner).as_owner("alice");
    let id = client.start("hang", json!({})).await;
    let operator = mcp_task_layer::Operator::new(tables.store(&table).await);
    assert_eq!(
        operator.cancel(&id).await.unwrap(),
        CancelOutcome::Cancelled
    );
    eventually(|| cancelled_handlers(&client) == 1, "the handler stopped").await;
    client.wait_for(&id, TaskStatus::Cancelled).await;
    tables.drop_all().await;
}

/// The same on Redis, whose pub/sub change feed carries the cancel.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_only_operator_stops_a_handler_in_another_layer_on_redis() {
    let Some(url) = common::redis_db::url() else {
        return;
    };
    let prefixes = common::redis_db::Prefixes::new(&url, "operator");
    let prefix = prefixes.next();
    let runner =
        layer_on(prefixes.store(&prefix).await).with_lease_ttl(std::time::Duration::from_secs(600));
    let mut client = Client::new(runner).as_owner("alice");
    let id = client.start("hang", json!({})).await;
    let operator = mcp_task_layer::Operator::new(prefixes.store(&prefix).await);
    assert_eq!(
        operator.cancel(&id).await.unwrap(),
        CancelOutcome::Cancelled
    );
    eventually(|| cancelled_handlers(&client) == 1, "the handler stopped").await;
    client.wait_for(&id, TaskStatus::Cancelled).await;
    prefixes.drop_all().await;
}

/// Records sealed at rest come back sealed to an operator without the
/// keys, opened to one with them; either can cancel them.
#[cfg(feature = "seal")]
#[tokio::test]
async fn sealed_tasks_stay_sealed_without_the_keys() {
    use mcp_task_layer::store::{MemoryStore, SealKeyRing, SealedStore};

    let raw = MemoryStore::new();
    let ring = SealKeyRing::single("k1", [7; 32]).unwrap();
    let runner = layer_on(SealedStore::new(raw.clone(), ring))
        .with_lease_ttl(std::time::Duration::from_millis(300));
    let keyed = runner.operator();
    let mut client = Client::new(runner).as_owner("alice");
    let id = client.start("hang", json!({"secret": "hunter2"})).await;
    let opened = keyed.get(&id).await.unwrap().unwrap();
    assert_eq!(
        opened.arguments.as_ref().unwrap().get(),
        r#"{"secret":"hunter2"}"#
    );
    let blind = mcp_task_layer::Operator::new(raw);
    let sealed = blind.get(&id).await.unwrap().unwrap();
    assert!(sealed.arguments.is_none() && sealed.sealed.contains_key("arguments"));
    let listed = blind.list(&TaskQuery::new()).await.unwrap();
    assert!(listed.tasks[0].sealed.contains_key("arguments"));
    let searched = keyed
        .list(&TaskQuery::new().search("hunter2"))
        .await
        .unwrap();
    assert!(
        searched.tasks.is_empty(),
        "sealed arguments are not searched"
    );
    assert_eq!(blind.cancel(&id).await.unwrap(), CancelOutcome::Cancelled);
    eventually(|| cancelled_handlers(&client) == 1, "the handler stopped").await;
    client.wait_for(&id, TaskStatus::Cancelled).await;
}

/// An operator whose key ring cannot open a task's sealed fields (a key
/// missing from its file) still cancels the task, and the handler stops.
/// Before, its `SealedStore` read the task as `failed` (its fail-closed
/// reading for callers), and the cancel answered "already ended: failed"
/// while the task ran on.
#[cfg(feature = "seal")]
#[tokio::test]
async fn an_operator_whose_keys_do_not_open_a_task_still_cancels_it() {
    use mcp_task_layer::store::{MemoryStore, SealKeyRing, SealedStore};

    let raw = MemoryStore::new();
    let ring = SealKeyRing::single("k1", [7; 32]).unwrap();
    let runner = layer_on(SealedStore::new(raw.clone(), ring))
        .with_lease_ttl(std::time::Duration::from_millis(300));
    let mut client = Client::new(runner).as_owner("alice");
    let id = client.start("hang", json!({"secret": "hunter2"})).await;
    let other = SealKeyRing::single("k2", [9; 32]).unwrap();
    let wrong = mcp_task_layer::Operator::new(SealedStore::new(raw, other));
    let shown = wrong.get(&id).await.unwrap().unwrap();
    assert_eq!(shown.status, TaskStatus::Failed, "read fail-closed");
    assert_eq!(wrong.cancel(&id).await.unwrap(), CancelOutcome::Cancelled);
    eventually(|| cancelled_handlers(&client) == 1, "the handler stopped").await;
    client.wait_for(&id, TaskStatus::Cancelled).await;
}
