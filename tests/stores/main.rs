//! Every store through the conformance suite, the SQL stores' own promises
//! (replicas sharing a table, migrations, JSON fidelity), and a layer that
//! keeps its tasks across a restart on a SQLite file. Each SQL engine has a
//! module of its own (`sqlite`, `postgres`), and so has the restart.
//!
//! Redis tests read `MCP_TASKS_REDIS_URL` (`.ci/redis.sh`) the same way,
//! each under key prefixes of its own; those that restart a server start
//! one of their own.
//!
//! PostgreSQL tests read `MCP_TASKS_POSTGRES_URL` (`.ci/postgres.sh` starts
//! a private cluster and prints it). Without it they print a note and pass,
//! except under `CI=true`, where a missing URL fails them. Each PostgreSQL
//! test works in tables of its own, so they run in parallel.

#[path = "../common/mod.rs"]
mod common;

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
use std::sync::Arc;

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
use mcp_task_layer::store::ListQuery;
use mcp_task_layer::store::{conformance, Era, Error, MemoryStore, TaskRecord, TaskStore};
use serde_json::json;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn record(id: &str, owner: Option<&str>, created: i64, ttl: Option<u64>) -> TaskRecord {
    TaskRecord::new(id, Era::Modern, "tool", json!({"a": 1}), created, ttl)
        .with_owner(owner.map(str::to_owned))
}

#[tokio::test]
async fn memory_store_conforms() {
    conformance::run(|| async { MemoryStore::new() }).await;
}

/// The memory store walks its creation index for a search: a page reads at
/// most `WALK_BUDGET` records, so two matches that far apart take more
/// than one page (the conformance case checks they are all found).
#[tokio::test]
async fn memory_search_pages_are_bounded_walks() {
    let pages = conformance::operator_pages_of_rare_matches_are_bounded(MemoryStore::new()).await;
    assert!(
        pages > 1,
        "a walk past WALK_BUDGET records stops: {pages} page(s)"
    );
}

/// A listing of one tool or one owner reads that index, not a walk of
/// every task: two matches `WALK_BUDGET` tasks apart come on one page.
#[tokio::test]
async fn memory_lists_one_tool_or_owner_from_its_index() {
    use mcp_task_layer::store::{TaskQuery, WALK_BUDGET};

    let store = MemoryStore::new();
    let ops = store.operator().unwrap();
    let rare = |id: &str, at: i64| {
        TaskRecord::new(id, Era::Legacy, "rare", json!({}), at, None)
            .with_owner(Some("carol".into()))
    };
    store.create(rare("old", T0)).await.unwrap();
    // The index is built at the first operator call, then kept by writes.
    assert!(ops
        .find(&TaskQuery::new().limit(1), T0)
        .await
        .unwrap()
        .walked_to
        .is_none());
    for i in 1..=WALK_BUDGET + 10 {
        let r = record(&format!("f{i:05}"), Some("alice"), T0 + i as i64, None);
        store.create(r).await.unwrap();
    }
    let now = T0 + WALK_BUDGET as i64 + 20;
    store.create(rare("new", now)).await.unwrap();
    for query in [
        TaskQuery::new().tool("rare"),
        TaskQuery::new().owner("carol"),
    ] {
        let found = ops.find(&query.limit(10), now).await.unwrap();
        let ids: Vec<&str> = found.tasks.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["new", "old"]);
        assert!(found.walked_to.is_none(), "read from its index");
    }
}

#[tokio::test]
async fn connect_memory_and_unknown_urls() {
    let store = mcp_task_layer::store::connect("memory").await.unwrap();
    store.create(record("m1", None, T0, None)).await.unwrap();
    assert!(store.get("m1", T0).await.unwrap().is_some());
    let mut unsupported = vec!["tasks.db", "", "mysql://127.0.0.1/"];
    if cfg!(not(feature = "redis")) {
        unsupported.push("redis://127.0.0.1/");
    }
    for url in unsupported {
        match mcp_task_layer::store::connect(url).await {
            Err(Error::Unsupported(_)) => {}
            other => panic!("{url:?} must be Unsupported, got {other:?}"),
        }
    }
}

/// Several stores on one table (replicas): concurrent reapers split the
/// expired rows between them, each reported once; racing writers from
/// different stores have one winner.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
async fn replicas_share_one_table<S: TaskStore + Clone>(replicas: Vec<S>) {
    use std::collections::BTreeSet;

    let first = replicas[0].clone();
    for i in 0..60 {
        first
            .create(record(&format!("exp{i:03}"), None, T0, Some(1_000)))
            .await
            .unwrap();
    }
    first
        .create(record("alive", None, T0, Some(60_000)))
        .await
        .unwrap();
    let mut reapers = Vec::new();
    for store in &replicas {
        for _ in 0..2 {
            let store = store.clone();
            reapers.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let batch = store.delete_expired(T0 + 1_000, 4).await.unwrap();
                    if batch.is_empty() {
                        return mine;
                    }
                    mine.extend(batch);
                }
            }));
        }
    }
    let mut all = Vec::new();
    for r in reapers {
        all.extend(r.await.unwrap());
    }
    let unique: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(unique.len(), all.len(), "an expired id reported twice");
    assert_eq!(unique.len(), 60, "every expired row reaped");
    assert!(first.get("alive", T0 + 1_000).await.unwrap().is_some());

    let r = record("race", None, T0, None);
    first.create(r.clone()).await.unwrap();
    let mut writers = Vec::new();
    for (i, store) in replicas.iter().cycle().take(12).enumerate() {
        let store = store.clone();
        let mut next = r.next_version(T0 + 1);
        next.status_message = Some(format!("writer {i}"));
        writers.push(tokio::spawn(async move { store.replace(next, 1).await }));
    }
    let mut wins = 0;
    for w in writers {
        match w.await.unwrap() {
            Ok(()) => wins += 1,
            Err(Error::Conflict) => {}
            Err(e) => panic!("a losing writer must get Conflict, got {e:?}"),
        }
    }
    assert_eq!(wins, 1, "exactly one replica's compare-and-set wins");
    let seen = replicas[replicas.len() - 1]
        .get("race", T0 + 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.version, 2, "every replica reads the winner");
}

/// What JSON can hold comes back exactly: NUL and non-ASCII text, big and
/// fractional numbers, nested results, every optional field set.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
async fn records_round_trip_exactly<S: TaskStore>(store: S) {
    use mcp_task_layer::store::TaskOutcome;
    use mcp_task_layer::JsonText;
    use mcp_task_layer::TaskStatus;

    let mut r = TaskRecord::new(
        "fidelity",
        Era::Legacy,
        "wéird\u{0}tool",
        json!({
            "nul": "a\u{0}b", "emoji": "🦀", "quote": "'\"; DROP TABLE x; --",
            "big": u64::MAX, "neg": i64::MIN, "tenth": 0.1, "tiny": 1e-300, "half": -0.5,
            "nested": {"z": [1, {"y": null}], "a": true}
        }),
        T0,
        Some(u64::MAX),
    )
    .with_owner(Some("owner with spaces / ünïcode".into()));
    r.status = TaskStatus::Completed;
    r.status_message = Some("done\nnewline".into());
    r.poll_interval_ms = Some(250);
    r.meta = Some(JsonText::from_value(
        &json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
    ));
    r.request_state = Some("opaque\u{0}state".into());
    r.round = 3;
    r.issued_keys.insert("name".into());
    r.issued_keys.insert("name.2".into());
    r.cancel_requested = true;
    r.outcome = Some(TaskOutcome::Result(JsonText::from_value(
        &json!({"content": [{"type": "text", "text": "\u{0}"}], "isError": false}),
    )));
    store.create(r.clone()).await.unwrap();
    let got = store.get("fidelity", T0).await.unwrap().unwrap();
    assert_eq!(*got, r);
    assert!(
        store.get("fidelity", i64::MAX - 1).await.unwrap().is_some(),
        "a TTL past i64::MAX ms expires at the end of time"
    );
    let owned = store
        .list(ListQuery::new(r.owner.as_deref(), r.era, 10, T0))
        .await
        .unwrap();
    assert_eq!(owned.len(), 1);
}

/// Tasks without an owner list apart from owned ones, newest first, paged.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
async fn unowned_tasks_list_apart<S: TaskStore>(store: S) {
    for i in 0..4 {
        store
            .create(record(&format!("u{i}"), None, T0 + i, None))
            .await
            .unwrap();
    }
    store
        .create(record("o0", Some("alice"), T0 + 9, None))
        .await
        .unwrap();
    let ids = |page: Vec<Arc<TaskRecord>>| page.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    let first = store
        .list(ListQuery::new(None, Era::Modern, 3, T0))
        .await
        .unwrap();
    assert_eq!(ids(first.clone()), ["u3", "u2", "u1"]);
    let last = first.last().unwrap();
    let rest = store
        .list(ListQuery::new(None, Era::Modern, 3, T0).after(last.created_at_ms, &last.id))
        .await
        .unwrap();
    assert_eq!(ids(rest), ["u0"]);
    assert!(store
        .list(ListQuery::new(None, Era::Modern, 0, T0))
        .await
        .unwrap()
        .is_empty());
}

#[cfg(any(feature = "postgres", feature = "redis"))]
/// What the change feed announces: every write a client can see, a partial
/// answer in the same millisecond (same status, same `updated_at_ms`)
/// included; not a lease renewal.
async fn announces_every_visible_write<S: TaskStore>(store: &S) {
    use mcp_task_layer::store::{Lease, PendingInput, TaskChange};
    use mcp_task_layer::{InputRequest, TaskStatus};
    use tokio::sync::broadcast::Receiver;

    async fn next(feed: &mut Receiver<TaskChange>) -> TaskChange {
        tokio::time::timeout(std::time::Duration::from_secs(10), feed.recv())
            .await
            .expect("a change within 10 s")
            .expect("the feed is open")
    }
    let updated = |id: &str, version, status| TaskChange::Updated {
        id: id.into(),
        version,
        status,
    };
    let mut feed = store.changes().expect("a change feed");
    assert_eq!(
        next(&mut feed).await,
        TaskChange::Missed,
        "the feed is listening"
    );
    let mut asking = record("asking", Some("alice"), T0, None);
    asking.status = TaskStatus::InputRequired;
    for key in ["a", "b"] {
        let request = InputRequest::new("elicitation/create", serde_json::Map::new());
        let pending = PendingInput {
            inner_key: key.into(),
            request,
        };
        asking.input_requests.insert(key.into(), pending);
    }
    store.create(asking.clone()).await.unwrap();
    let mut partial = asking.next_version(T0);
    partial.input_requests.remove("a");
    store.replace(partial, 1).await.unwrap();
    assert_eq!(
        next(&mut feed).await,
        updated("asking", 2, TaskStatus::InputRequired),
        "a partial answer in the same millisecond"
    );
    let mut running = record("running", Some("alice"), T0, None);
    running.lease = Some(Lease {
        holder: "a".into(),
        fence: 1,
        until_ms: T0 + 30_000,
    });
    store.create(running.clone()).await.unwrap();
    let mut renewed = running.clone();
    renewed.version = 2;
    if let Some(lease) = &mut renewed.lease {
        lease.until_ms = T0 + 40_000;
    }
    store.replace(renewed.clone(), 1).await.unwrap();
    let mut cancel = renewed.clone();
    cancel.version = 3;
    cancel.cancel_requested = true;
    store.replace(cancel, 2).await.unwrap();
    assert_eq!(
        next(&mut feed).await,
        updated("running", 3, TaskStatus::Working),
        "the renewal (version 2) is not announced; a cancel request is"
    );
}

/// The operator API of a store that has one (the Redis store's tests).
#[cfg(feature = "redis")]
fn ops(store: &impl TaskStore) -> &dyn mcp_task_layer::store::OperatorStore {
    store.operator().expect("operator API")
}

/// The list member (`lm`) of task `id` under `prefix`, as the Redis store
/// wrote it.
#[cfg(feature = "redis")]
async fn list_member(
    conn: &mut ::redis::aio::MultiplexedConnection,
    prefix: &str,
    id: &str,
) -> String {
    ::redis::cmd("HGET")
        .arg(format!("{prefix}:task:{{{id}}}"))
        .arg("lm")
        .query_async(conn)
        .await
        .unwrap()
}

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_claims;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redis_batch;
#[cfg(feature = "redis")]
mod redis_claim;
#[cfg(feature = "redis")]
mod redis_index;
#[cfg(feature = "redis")]
mod redis_tools;
#[cfg(feature = "sqlite")]
mod restart;
#[cfg(feature = "seal")]
mod sealed;
#[cfg(feature = "sqlite")]
mod sqlite;
