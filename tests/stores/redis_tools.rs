//! The Redis store's tool indexes (`<prefix>:ops:tool:<tool>`): a listing
//! of one tool reads its index, not a walk of every task; tasks stored
//! before the indexes existed are put in them when a store connects; a
//! deleted task leaves its tool's index.

use mcp_task_layer::store::{TaskQuery, WALK_BUDGET};
use mcp_task_layer::TaskStatus;

use super::common::redis_db::{connection, url, Prefixes};
use super::*;

fn of_tool(id: &str, tool: &str, created: i64) -> TaskRecord {
    TaskRecord::new(id, Era::Modern, tool, json!({}), created, None)
}

/// Two tasks of a rare tool, more than `WALK_BUDGET` tasks of another
/// apart, come back on one page (a walk of every task would stop after
/// `WALK_BUDGET` and need another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lists_one_tool_from_its_index() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "tools");
    let store = p.store(&p.next()).await;
    store.create(of_tool("old", "rare", T0)).await.unwrap();
    for i in 1..=WALK_BUDGET + 10 {
        let r = of_tool(&format!("f{i:05}"), "common", T0 + i as i64);
        store.create(r).await.unwrap();
    }
    let newest = T0 + WALK_BUDGET as i64 + 20;
    store.create(of_tool("new", "rare", newest)).await.unwrap();
    let query = TaskQuery::new().tool("rare").limit(10);
    let found = ops(&store).find(&query, newest).await.unwrap();
    let ids: Vec<&str> = found.tasks.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["new", "old"]);
    assert!(found.walked_to.is_none(), "read from the tool's index");
    // With a status too, the smaller index is read: still one page.
    let both = query.status(TaskStatus::Working);
    let found = ops(&store).find(&both, newest).await.unwrap();
    assert_eq!(found.tasks.len(), 2);
    assert!(found.walked_to.is_none());
    p.drop_all().await;
}

/// Tasks written before the tool indexes existed (no `tk` field, no index,
/// no mark) are in their tool's index once a store connects, and leave it
/// when purged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_fills_tool_indexes_of_older_tasks_at_connect() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "toolfill");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    for i in 0..1_200 {
        let tool = if i % 400 == 0 { "rare" } else { "common" };
        store
            .create(of_tool(&format!("t{i:04}"), tool, T0 + i))
            .await
            .unwrap();
    }
    let mut done = of_tool("t0000", "rare", T0).next_version(T0 + 5);
    done.status = TaskStatus::Completed;
    done.arguments = None;
    store.replace(done, 1).await.unwrap();
    // Undo what this version wrote, and write what an older one did
    // (each task in `ops:all`): the store as an older one left it.
    let mut conn = connection(&url).await;
    for i in 0..1_200 {
        let id = format!("t{i:04}");
        let member = list_member(&mut conn, &prefix, &id).await;
        let key = format!("{prefix}:task:{{{id}}}");
        let () = ::redis::pipe()
            .cmd("HDEL")
            .arg(&key)
            .arg("tk")
            .ignore()
            .cmd("ZADD")
            .arg(format!("{prefix}:ops:all"))
            .arg(0)
            .arg(member)
            .ignore()
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let () = ::redis::cmd("DEL")
        .arg(format!("{prefix}:ops:tool:rare"))
        .arg(format!("{prefix}:ops:tool:common"))
        .arg(format!("{prefix}:ops:tools-indexed"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let rare = TaskQuery::new().tool("rare");
    assert!(ops(&store)
        .find(&rare, T0 + 10)
        .await
        .unwrap()
        .tasks
        .is_empty());

    let upgraded = p.store(&prefix).await;
    let found = ops(&upgraded).find(&rare, T0 + 10).await.unwrap();
    let ids: Vec<&str> = found.tasks.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["t0800", "t0400", "t0000"]);
    let size = |conn: &mut ::redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        let key = format!("{prefix}:ops:tool:rare");
        async move {
            ::redis::cmd("ZCARD")
                .arg(key)
                .query_async::<u64>(&mut conn)
                .await
                .unwrap()
        }
    };
    assert_eq!(size(&mut conn).await, 3);
    let purged = ops(&upgraded)
        .purge(&TaskQuery::new().status(TaskStatus::Completed), T0 + 10)
        .await
        .unwrap();
    assert_eq!(purged.deleted, 1);
    assert_eq!(
        size(&mut conn).await,
        2,
        "a purged task leaves its tool's index"
    );
    p.drop_all().await;
}
