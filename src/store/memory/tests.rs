//! MemoryStore's own tests, which look inside its shards.

use serde_json::{json, Value};

use super::id::Id;
use super::slot::Slot;
use super::*;
use crate::json::JsonText;
use crate::jsonrpc::JsonRpcError;
use crate::protocol::TaskStatus;
use crate::store::{conformance, Era, ListQuery, TaskOutcome};

fn finished(id: &str, outcome: Option<TaskOutcome>) -> TaskRecord {
    let mut r = TaskRecord::new(id, Era::Modern, "tool", Value::Null, 1_000, Some(60_000))
        .with_owner(Some("alice".into()));
    r.status = TaskStatus::Completed;
    r.status_message = Some("done".into());
    r.poll_interval_ms = Some(250);
    r.version = 3;
    r.round = 2;
    r.cancel_requested = true;
    r.outcome = outcome;
    r
}

#[tokio::test]
async fn passes_the_conformance_suite() {
    conformance::run(|| async { MemoryStore::new() }).await;
}

#[tokio::test]
async fn shared_writes_keep_the_callers_record_and_compare_versions() {
    let store = MemoryStore::new();
    let first = Arc::new(TaskRecord::new(
        "s",
        Era::Modern,
        "t",
        json!({"a": 1}),
        1,
        None,
    ));
    store.create_shared(Arc::clone(&first)).await.unwrap();
    assert!(matches!(
        store.create_shared(Arc::clone(&first)).await,
        Err(Error::AlreadyExists)
    ));
    let got = store.get("s", 2).await.unwrap().unwrap();
    assert!(
        Arc::ptr_eq(&got, &first),
        "a running task is kept, not copied"
    );
    let next = Arc::new(first.next_version(5));
    assert!(matches!(
        store.replace_shared(Arc::clone(&next), 7).await,
        Err(Error::Conflict)
    ));
    store.replace_shared(Arc::clone(&next), 1).await.unwrap();
    assert_eq!(*store.get("s", 6).await.unwrap().unwrap(), *next);
    let mut other = (*next).clone();
    other.id = "absent".into();
    assert!(matches!(
        store.replace_shared(Arc::new(other), 2).await,
        Err(Error::NotFound)
    ));
}

#[tokio::test]
async fn finished_records_are_compact_and_read_back_exactly() {
    let result = json!({
        "content": [{"type": "text", "text": "hé \u{1F600}"}],
        "n": -1, "u": u64::MAX, "f": 0.1, "z": -0.0, "big": 1e300, "null": null,
        "nested": {"a": [true, false, {}], "b": ""}
    });
    let outcomes = [
        Some(TaskOutcome::Result(JsonText::from_value(&result))),
        Some(TaskOutcome::Error(
            JsonRpcError::new(-32050, "boom").with_data(json!({"x": [1, 2.5]})),
        )),
        Some(TaskOutcome::Error(JsonRpcError::new(-32603, "no data"))),
        None,
    ];
    let store = MemoryStore::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let id = format!("task-{i}");
        let mut done = finished(&id, outcome);
        done.version = 2;
        // Texts of every length, multi-byte ones, and absent ones.
        match i {
            1 => done.owner = None,
            2 => done.status_message = None,
            3 => {
                done.owner = Some("ü".repeat(40));
                done.tool_name = String::new();
                done.status_message = Some("é\u{1F600}".into());
            }
            _ => {}
        }
        let mut working = done.clone();
        working.status = TaskStatus::Working;
        working.outcome = None;
        working.version = 1;
        store.create(working).await.unwrap();
        store.replace(done.clone(), 1).await.unwrap();
        {
            let shard = read(store.shard(&Id::new(&id)));
            assert!(matches!(
                shard.tasks.get(&Id::new(&id)),
                Some(Slot::Done(_))
            ));
        }
        let got = store.get(&id, 1_000).await.unwrap().unwrap();
        assert_eq!(*got, done);
        let listed = store
            .list(ListQuery::new(done.owner.as_deref(), done.era, 10, 1_000))
            .await
            .unwrap();
        assert!(listed.iter().any(|r| **r == done));
    }
}

#[tokio::test]
async fn records_that_cannot_be_compacted_stay_whole() {
    let store = MemoryStore::new();
    // Resume state left in place, or an error whose `data` is `null`
    // (its JSON would read back without `data`).
    let mut kept = finished("args", None);
    kept.arguments = Some(JsonText::from_value(&json!({"a": 1})));
    kept.version = 1;
    let mut null_data = finished(
        "null-data",
        Some(TaskOutcome::Error(
            JsonRpcError::new(1, "x").with_data(Value::Null),
        )),
    );
    null_data.version = 1;
    for r in [kept, null_data] {
        store.create(r.clone()).await.unwrap();
        assert!(matches!(
            read(store.shard(&Id::new(&r.id)))
                .tasks
                .get(&Id::new(&r.id)),
            Some(Slot::Full(_))
        ));
        assert_eq!(*store.get(&r.id, 1_000).await.unwrap().unwrap(), r);
    }
}

#[tokio::test]
async fn reaping_expired_compact_records_cleans_every_index() {
    let store = MemoryStore::new();
    for i in 0..100 {
        let mut r = finished(&format!("t{i}"), None);
        r.ttl_ms = Some(if i % 2 == 0 { 10 } else { 60_000 });
        store.create(r).await.unwrap();
    }
    let mut gone = store.delete_expired(1_010, 7).await.unwrap();
    gone.extend(store.delete_expired(1_010, 1_000).await.unwrap());
    assert_eq!(gone.len(), 50);
    assert_eq!(store.len(), 50);
    let listed = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 1_000, 1_010))
        .await
        .unwrap();
    assert_eq!(listed.len(), 50);
    let total: usize = store
        .inner
        .shards
        .iter()
        .map(|s| read(s).expiry.len())
        .sum();
    assert_eq!(total, 50);
}

#[tokio::test]
async fn reaping_takes_every_expired_record_in_bounded_batches() {
    // About 150 per shard: more than one batch per lock.
    let store = MemoryStore::new();
    for i in 0..10_000 {
        let r = TaskRecord::new(format!("x{i}"), Era::Modern, "t", Value::Null, 0, Some(1));
        store.create(r).await.unwrap();
    }
    store
        .create(TaskRecord::new(
            "alive",
            Era::Modern,
            "t",
            Value::Null,
            0,
            None,
        ))
        .await
        .unwrap();
    assert_eq!(store.delete_expired(5, 9_000).await.unwrap().len(), 9_000);
    assert_eq!(
        store.delete_expired(5, usize::MAX).await.unwrap().len(),
        1_000
    );
    assert_eq!(store.len(), 1);
    assert_eq!(
        store
            .list(ListQuery::new(None, Era::Modern, 10, 5))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn reaping_most_of_a_burst_gives_the_maps_memory_back() {
    let capacity = |store: &MemoryStore| -> usize {
        store
            .inner
            .shards
            .iter()
            .map(|s| read(s).tasks.capacity())
            .sum()
    };
    let store = MemoryStore::new();
    for i in 0..200_000 {
        let r = TaskRecord::new(format!("b{i}"), Era::Modern, "t", Value::Null, 0, Some(1));
        store.create(r).await.unwrap();
    }
    for i in 0..1_000 {
        let r = TaskRecord::new(format!("k{i}"), Era::Modern, "t", Value::Null, 0, None);
        store.create(r).await.unwrap();
    }
    let peak = capacity(&store);
    assert!(peak >= 201_000);
    store.delete_expired(5, usize::MAX).await.unwrap();
    assert_eq!(store.len(), 1_000);
    let after = capacity(&store);
    assert!(
        after <= SHARDS * SHRINK_ABOVE && after * 3 < peak,
        "capacity {after} after reaping, {peak} at the peak"
    );
    for i in 0..1_000 {
        assert!(store.get(&format!("k{i}"), 5).await.unwrap().is_some());
    }
}

/// The creation and tool indexes cost nothing until an operator asks; from then on
/// it holds the records stored before and those written after, and loses
/// the reaped ones.
#[tokio::test]
async fn the_creation_index_is_built_at_the_first_operator_call() {
    use crate::store::{OperatorStore, TaskQuery};

    let store = MemoryStore::new();
    let make = |id: &str, created: i64| {
        TaskRecord::new(id, Era::Modern, "t", Value::Null, created, Some(10))
    };
    let indexed = |store: &MemoryStore| -> usize {
        store
            .inner
            .shards
            .iter()
            .map(|s| {
                let s = read(s);
                s.created.len() + s.tools.values().map(BTreeSet::len).sum::<usize>()
            })
            .sum()
    };
    let query = TaskQuery::new();
    store.create(make("before", 1)).await.unwrap();
    assert_eq!(indexed(&store), 0, "no operator yet, no index");
    let found = store.find(&query, 5).await.unwrap().tasks;
    assert_eq!(found[0].id, "before");
    store.create(make("after", 2)).await.unwrap();
    let found = store.find(&query, 5).await.unwrap().tasks;
    let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["after", "before"]);
    assert_eq!(
        indexed(&store),
        4,
        "each in the creation and the tool index"
    );
    assert_eq!(store.delete_expired(100, 10).await.unwrap().len(), 2);
    assert_eq!(indexed(&store), 0, "reaped records leave the index");
}
