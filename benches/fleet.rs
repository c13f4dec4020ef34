//! A worker fleet's throughput and latency on PostgreSQL (issue #18):
//! inline execution (one replica runs what it accepts) against a front
//! with queued execution and one, then two workers, all in this process
//! on a two-thread runtime, each replica with its own connection pool and
//! `LISTEN`, one table.
//!
//! ```sh
//! MCP_TASKS_POSTGRES_URL=postgres://... \
//!   cargo bench -p mcp-task-layer-benches --features postgres --bench fleet
//! ```
//!
//! Each run submits `TASKS` calls of a `Task` tool from 32 concurrent
//! callers (throughput), then from one caller every 10 ms (latency); the handler yields once and answers a ~100-byte result (so it
//! is never finished on its first poll, and inline execution runs it on a
//! runner). The rate is tasks created and completed per second, from the
//! first call to the last completion (seen by counting completed rows every
//! 5 ms); the latency is each task's `updated_at_ms - created_at_ms` in
//! the table (creation to completion, in milliseconds), median and p99.
#![allow(missing_docs)]

mod support;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use mcp_task_layer::store::{PostgresStore, SqlOptions};
use mcp_task_layer::{Execution, JsonRpcRequest, JsonRpcResponse, TaskLayer, TaskPolicy};
use serde_json::Value;
use sqlx::{AssertSqlSafe, Connection, Row};
use tower::{Service, ServiceExt};

const TASKS: usize = 2_000;
const CALLERS: usize = 32;

/// The MCP server: yields once, then answers with a ~100-byte result.
async fn handler(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    tokio::task::yield_now().await;
    Ok(JsonRpcResponse::result(
        req.id,
        Value::Object(support::result_100b()),
    ))
}

async fn store(url: &str, table: &str) -> PostgresStore {
    let options = SqlOptions::new().with_table(table).expect("table name");
    PostgresStore::connect_with(url, options)
        .await
        .expect("postgres")
}

fn layer(store: PostgresStore, execution: Execution) -> TaskLayer {
    TaskLayer::new(store)
        .with_tool_policy("work", TaskPolicy::Task)
        .with_execution(execution)
}

/// One configuration: `workers` = 0 is inline execution. `paced`: one
/// call every 10 ms from one caller (far below capacity: the latency is
/// the path's own), else as fast as 32 callers can.
async fn run(url: &str, workers: usize, paced: bool) -> (f64, i64, i64) {
    let table = format!("bench_fleet_{}_{workers}", std::process::id());
    let execution = if workers == 0 {
        Execution::Inline
    } else {
        Execution::Queued
    };
    let front_store = store(url, &table).await;
    let front = layer(front_store.clone(), execution);
    let svc = tower::ServiceBuilder::new()
        .layer(front.clone())
        .service_fn(handler);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut fleet = Vec::new();
    for _ in 0..workers {
        let worker = layer(store(url, &table).await, Execution::Queued)
            .worker(tower::service_fn(handler))
            .with_concurrency(32)
            .with_poll_interval(Duration::from_secs(1));
        let mut stopped = stopped.clone();
        fleet.push(tokio::spawn(worker.run(
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            },
            Duration::from_secs(1),
        )));
    }
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let started = Instant::now();
    let callers = if paced { 1 } else { CALLERS };
    let callers: Vec<_> = (0..callers)
        .map(|c| {
            let mut svc = svc.clone();
            tokio::spawn(async move {
                let mut pace = tokio::time::interval(Duration::from_millis(10));
                for i in (c..TASKS).step_by(if paced { 1 } else { CALLERS }) {
                    if paced {
                        pace.tick().await;
                    }
                    let req = support::call(i64::try_from(i).unwrap_or(0), "work");
                    let resp = svc.ready().await.expect("ready").call(req).await;
                    assert!(resp.is_ok_and(|r| !r.is_error()), "a task was created");
                }
            })
        })
        .collect();
    for c in callers {
        c.await.expect("caller");
    }
    let count = format!("SELECT count(*) FROM \"{table}\" WHERE status = 'completed'");
    loop {
        let done: i64 = sqlx::query(AssertSqlSafe(count.clone()))
            .fetch_one(&mut conn)
            .await
            .expect("count")
            .get(0);
        if usize::try_from(done).unwrap_or(0) >= TASKS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    let latency = format!(
        "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY updated_at_ms - created_at_ms), \
                percentile_disc(0.99) WITHIN GROUP (ORDER BY updated_at_ms - created_at_ms) \
         FROM \"{table}\""
    );
    let row = sqlx::query(AssertSqlSafe(latency))
        .fetch_one(&mut conn)
        .await
        .expect("latency");
    let (p50, p99): (i64, i64) = (row.get(0), row.get(1));
    let _ = stop.send(true);
    for w in fleet {
        w.await.expect("worker");
    }
    front_store.close().await;
    let drop = format!("DROP TABLE \"{table}\", \"{table}_migrations\"");
    sqlx::query(AssertSqlSafe(drop))
        .execute(&mut conn)
        .await
        .expect("drop the bench table");
    let rate = TASKS as f64 / elapsed.as_secs_f64();
    (rate, p50, p99)
}

fn main() {
    let Some(url) = std::env::var("MCP_TASKS_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("fleet: skipped (set MCP_TASKS_POSTGRES_URL; see .ci/postgres.sh)");
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    println!("{TASKS} tasks, PostgreSQL, one process, 2 threads");
    for paced in [false, true] {
        println!(
            "{}",
            if paced {
                "one call every 10 ms (the path's latency):"
            } else {
                "as fast as 32 callers can (throughput):"
            }
        );
        for (label, workers) in [
            ("inline", 0),
            ("front + 1 worker", 1),
            ("front + 2 workers", 2),
        ] {
            let (rate, p50, p99) = rt.block_on(run(&url, workers, paced));
            println!(
                "{label:>18}: {rate:>7.0} tasks/s, creation to completion p50 {p50} ms, p99 {p99} ms"
            );
        }
    }
}
