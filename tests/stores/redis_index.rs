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
    let () = ::redis::cmd("ZADD")
        .arg(format!("{prefix}:ops:all"))
        .arg(0)
        .arg(member)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        ids(TaskQuery::new()).await,
        ["t5", "t4", "t3", "t2", "t1", "t0"]
    );
    p.drop_all().await;
}
