//! What one page of an operator's listing costs on Redis when it walks
//! (issue 30): a search (Redis has no index of text) reads at most
//! `WALK_BUDGET` records a page, whatever the store holds; a tool reads
//! its own index. Fills a fresh prefix with N tasks (one in 1,000 of a rare
//! tool holding a rare word), then times pages.
//!
//! ```sh
//! bash .ci/redis.sh start   # eval the export lines it prints
//! cargo run --release -p mcp-task-layer-benches --features redis --example redis_walk -- 100000
//! ```

use std::time::Instant;

use mcp_task_layer::store::{Era, RedisOptions, RedisStore, TaskQuery, TaskRecord, TaskStore};
use serde_json::json;

#[tokio::main]
async fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let url = std::env::var("MCP_TASKS_REDIS_URL").expect("MCP_TASKS_REDIS_URL");
    let prefix = format!("walkbench{}", std::process::id());
    let options = RedisOptions::new().with_prefix(&prefix).expect("prefix");
    let store = RedisStore::connect_with(&url, options)
        .await
        .expect("connect");
    let started = Instant::now();
    let mut creates = tokio::task::JoinSet::new();
    for i in 0..n {
        let (tool, word) = if i % 1000 == 0 {
            ("rare", "zebra")
        } else {
            ("common", "horse")
        };
        let args = json!({ "query": format!("row {i} {word}"), "limit": 10 });
        let r = TaskRecord::new(format!("t{i:07}"), Era::Modern, tool, args, i, None);
        let store = store.clone();
        creates.spawn(async move { store.create(r).await.expect("create") });
        if creates.len() >= 256 {
            creates.join_next().await;
        }
    }
    creates.join_all().await;
    println!("filled {n} tasks in {:.1?}", started.elapsed());
    let ops = store.operator().expect("operator");
    for (name, query) in [
        ("from the top", TaskQuery::new()),
        ("tool rare (its index)", TaskQuery::new().tool("rare")),
        ("search zebra (a walk)", TaskQuery::new().search("zebra")),
        (
            "search nowhere (a walk)",
            TaskQuery::new().search("nowhere"),
        ),
    ] {
        let query = query.limit(50);
        let mut times = Vec::new();
        let mut got = (0, false);
        for _ in 0..21 {
            let t = Instant::now();
            let found = ops.find(&query, n + 1).await.expect("find");
            times.push(t.elapsed());
            got = (found.tasks.len(), found.walked_to.is_some());
        }
        times.sort();
        println!(
            "page {name}: median {:.2?} (min {:.2?}, max {:.2?}), {} tasks, walk stopped: {}",
            times[10], times[0], times[20], got.0, got.1
        );
    }
    store.close().await;
    let client = redis::Client::open(url).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut conn)
        .await
        .expect("keys");
    for chunk in keys.chunks(1000) {
        let () = redis::cmd("DEL")
            .arg(chunk)
            .query_async(&mut conn)
            .await
            .expect("del");
    }
}
