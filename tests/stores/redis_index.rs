//! The Redis store's index of every task is its five status indexes
//! (`<prefix>:ops:st:<status>`): a write adds no member to
//! `<prefix>:ops:all` (one command fewer per task), and a listing of every
//! task, or of several statuses, merges the status indexes newest first,
//! page by page; tasks an older version also put in `ops:all` are listed
//! once.

use mcp_task_layer::store::{TaskCursor, TaskQuery};
use mcp_task_layer::TaskStatus;

use super::common::redis_db::{connection, url, Prefixes};
use super::*;

/// Tasks `t0`..`t5` (created in that order), two of them completed, one
/// cancelled: no `ops:all` is written; every task, and two statuses, list
/// newest first, whole or a page of two at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lists_every_task_from_the_status_indexes() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "stindex");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    for i in 0..6 {
        let r = record(&format!("t{i}"), Some("alice"), T0 + i, None);
        store.create(r).await.unwrap();
    }
    for (id, status) in [
        ("t1", TaskStatus::Completed),
        ("t4", TaskStatus::Completed),
        ("t2", TaskStatus::Cancelled),
    ] {
        let mut done = (*store.get(id, T0).await.unwrap().unwrap())
            .clone()
            .next_version(T0 + 10);
        done.status = status;
        store.replace(done, 1).await.unwrap();
    }
    let mut conn = connection(&url).await;
    let all: bool = ::redis::cmd("EXISTS")
        .arg(format!("{prefix}:ops:all"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!all, "no write adds to ops:all");

    let ids = |query: TaskQuery| {
        let store = &store;
        async move {
            let mut out = Vec::new();
            let mut query = query.limit(2);
            loop {
                let found = ops(store).find(&query, T0 + 20).await.unwrap();
                assert!(found.walked_to.is_none());
                out.extend(found.tasks.iter().map(|r| r.id.clone()));
                let Some(last) = found.tasks.last().filter(|_| found.tasks.len() == 2) else {
                    return out;
                };
                query = query.after(TaskCursor::at(last.created_at_ms, &last.id));
            }
        }
    };
    assert_eq!(
        ids(TaskQuery::new()).await,
        ["t5", "t4", "t3", "t2", "t1", "t0"]
    );
    let ended = TaskQuery::new()
        .status(TaskStatus::Completed)
        .status(TaskStatus::Cancelled);
    assert_eq!(ids(ended).await, ["t4", "t2", "t1"]);

    // A task an older version made is also in `ops:all`: listed once.
    let member = list_member(&mut conn, &prefix, "t3").await;
    add_member(&mut conn, &format!("{prefix}:ops:all"), member).await;
    assert_eq!(
        ids(TaskQuery::new()).await,
        ["t5", "t4", "t3", "t2", "t1", "t0"]
    );

    // A member in two status indexes (an older version wrote the task in
    // between): taken once by the merge, on one page or across two.
    let member = list_member(&mut conn, &prefix, "t4").await;
    add_member(&mut conn, &format!("{prefix}:ops:st:working"), member).await;
    assert_eq!(
        ids(TaskQuery::new()).await,
        ["t5", "t4", "t3", "t2", "t1", "t0"]
    );
    let page = ops(&store).find(&TaskQuery::new(), T0 + 20).await.unwrap();
    assert_eq!(
        page.tasks.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["t5", "t4", "t3", "t2", "t1", "t0"]
    );
    p.drop_all().await;
}

/// The list member of a task created at `created` (`keys.rs`): the time as
/// 20 digits with the sign bit flipped, `:`, the id.
fn member_at(created: i64, id: &str) -> String {
    format!(
        "{:020}:{id}",
        u64::from_ne_bytes(created.to_ne_bytes()) ^ (1 << 63)
    )
}

/// `member` added to the index `key` at score 0, as an older version would.
async fn add_member(conn: &mut ::redis::aio::MultiplexedConnection, key: &str, member: String) {
    let () = ::redis::cmd("ZADD")
        .arg(key)
        .arg(0)
        .arg(member)
        .query_async(conn)
        .await
        .unwrap();
}

/// `n` members of tasks that are gone (Redis deleted them by their key's
/// TTL, which leaves their index members), newer than `T0`, added to `key`.
async fn dead_members(conn: &mut ::redis::aio::MultiplexedConnection, key: &str, n: i64) {
    let mut zadd = ::redis::cmd("ZADD");
    zadd.arg(key);
    for i in 1..=n {
        zadd.arg(0).arg(member_at(T0 + i, &format!("gone{i}")));
    }
    let () = zadd.query_async(conn).await.unwrap();
}

/// 2,500 dead members above one live task in its status index: an
/// operator's page examines at most `WALK_BUDGET` of them and says where
/// it stopped (no script walks them all at once); the next page finds the
/// task, and the walk has dropped every dead member it met.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_operator_walk_over_dead_members_stops_at_its_budget() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "stdead");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    store
        .create(record("live", Some("alice"), T0, None))
        .await
        .unwrap();
    let mut conn = connection(&url).await;
    let index = format!("{prefix}:ops:st:working");
    dead_members(&mut conn, &index, 2_500).await;

    let query = TaskQuery::new().limit(10);
    let first = ops(&store).find(&query, T0 + 10).await.unwrap();
    assert!(first.tasks.is_empty());
    let at = first.walked_to.expect("the walk stops at its budget");
    // 2,000 members examined, newest first: gone2500 down to gone501.
    assert_eq!(at.position(), (T0 + 501, "gone501"));
    let next = ops(&store)
        .find(&query.clone().after(at), T0 + 10)
        .await
        .unwrap();
    assert!(next.walked_to.is_none());
    assert_eq!(
        next.tasks.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["live"]
    );
    let left: usize = ::redis::cmd("ZCARD")
        .arg(&index)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 1, "only the live task's member is left");
    p.drop_all().await;
}

/// A client's listing over 2,500 dead members (more than one `list` call
/// examines) still finds the live task below them, and the one after it
/// on the next page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_listing_goes_on_past_dead_members() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "lsdead");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    for (id, at) in [("older", T0 - 1), ("live", T0)] {
        store
            .create(record(id, Some("alice"), at, None))
            .await
            .unwrap();
    }
    let mut conn = connection(&url).await;
    dead_members(&mut conn, &format!("{prefix}:list:modern:=alice"), 2_500).await;
    let page = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 1, T0 + 10))
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["live"]
    );
    let page = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 5, T0 + 10).after(T0, "live"))
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["older"]
    );
    p.drop_all().await;
}

/// The operator's counts and the ended tasks are read a chunk of 1,000
/// members per call: over more than one chunk of each index (queued
/// tasks in `leases`, waiting ones, expired ones, ended ones) every member
/// is counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_operator_counts_read_every_chunk() {
    use mcp_task_layer::store::{EndedQuery, Lease};
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "stchunks");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    let now = T0 + 100_000;
    let mut records = Vec::new();
    for i in 0..2_100 {
        let mut r = record(&format!("q{i}"), None, T0, None);
        r.lease = Some(Lease {
            holder: Lease::QUEUED.into(),
            fence: 1,
            until_ms: T0 + 5_000 - i,
        });
        records.push(r);
    }
    for i in 0..1_001 {
        let mut r = record(&format!("ask{i}"), None, T0, None);
        r.status = TaskStatus::InputRequired;
        r.updated_at_ms = T0 + 3_000 - i;
        records.push(r);
        for (id, ttl) in [(format!("old{i}"), Some(1_000)), (format!("done{i}"), None)] {
            let mut r = record(&id, None, T0, ttl);
            r.status = TaskStatus::Completed;
            r.arguments = None;
            r.updated_at_ms = T0 + 10 + i;
            records.push(r);
        }
    }
    let mut writes = tokio::task::JoinSet::new();
    for part in records.chunks(500) {
        let (store, part) = (store.clone(), part.to_vec());
        writes.spawn(async move {
            for r in part {
                store.create(r).await.unwrap();
            }
        });
    }
    while let Some(done) = writes.join_next().await {
        done.unwrap();
    }

    let stats = ops(&store).stats(now).await.unwrap();
    assert_eq!(stats.count(TaskStatus::Working), 2_100);
    assert_eq!(stats.queued, 2_100);
    assert_eq!(stats.count(TaskStatus::InputRequired), 1_001);
    assert_eq!(
        stats.count(TaskStatus::Completed),
        1_001,
        "less the expired"
    );
    let queued = stats.oldest_queued.expect("a queued task");
    assert_eq!((queued.id.as_str(), queued.since_ms), ("q2099", T0 + 2_902));
    let longest: Vec<&str> = stats
        .longest_input_required
        .iter()
        .map(|w| w.id.as_str())
        .collect();
    assert_eq!(longest.len(), 10);
    assert_eq!(longest[..2], ["ask1000", "ask999"]);
    let ended = ops(&store)
        .ended(EndedQuery::last(100_000, 100_000, now))
        .await
        .unwrap();
    assert_eq!(ended.totals(), [1_001, 0, 0]);
    p.drop_all().await;
}
