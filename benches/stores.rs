//! Store throughput: `create` and `get` of a completed task with a ~100-byte
//! result (about 450 bytes of JSON per record), one at a time and 16 at
//! once, and `complete` (a `working` task replaced by its completed next
//! version), on `MemoryStore` (for scale), `SqliteStore` on a file (WAL,
//! `synchronous = NORMAL`), `PostgresStore` when `MCP_TASKS_POSTGRES_URL`
//! is set (`.ci/postgres.sh` starts a local cluster) and `RedisStore` when
//! `MCP_TASKS_REDIS_URL` is set (`.ci/redis.sh` starts a local server).
//!
//! ```sh
//! cargo bench -p mcp-task-layer-benches --features sqlite,postgres,redis --bench stores
//! ```
//!
//! `get` reads random ids among 10,000 records created beforehand. The
//! runtime is tokio's multi-threaded one with two workers; "x16" runs 16
//! tasks that each do their share of the iterations back to back, so the
//! figure is the aggregate rate.
#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_task_layer::store::{Era, SqliteStore, TaskOutcome, TaskRecord, TaskStore};
use mcp_task_layer::{MemoryStore, TaskStatus};
use serde_json::{json, Value};
use tokio::runtime::Runtime;

/// A completed 2026-07-28 task with a ~100-byte result, one hour TTL.
fn completed_record(id: String, now_ms: i64, ttl_ms: Option<u64>) -> TaskRecord {
    let mut r = TaskRecord::new(id, Era::Modern, "work", Value::Null, now_ms, ttl_ms);
    r.status = TaskStatus::Completed;
    r.poll_interval_ms = Some(1000);
    r.version = 2;
    let result = json!({
        "resultType": "complete",
        "content": [{ "type": "text", "text": "x".repeat(48) }],
        "isError": false
    });
    r.outcome = result
        .as_object()
        .cloned()
        .map(|m| TaskOutcome::Result(m.into()));
    r
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Deterministic task ids and access orders.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A 32-hex-digit id, like the layer's.
    fn task_id(&mut self) -> String {
        format!("{:016x}{:016x}", self.next_u64(), self.next_u64())
    }
}

const PRELOADED: usize = 10_000;
const CONCURRENCY: u64 = 16;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Ids of `PRELOADED` records created in `store`.
fn preload(rt: &Runtime, store: &Arc<dyn TaskStore>) -> Arc<Vec<String>> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let ids: Vec<String> = (0..PRELOADED).map(|_| rng.task_id()).collect();
    rt.block_on(async {
        for id in &ids {
            store
                .create(completed_record(id.clone(), now_ms(), Some(3_600_000)))
                .await
                .expect("preload");
        }
    });
    Arc::new(ids)
}

/// `iters` operations split over `CONCURRENCY` tasks; the wall time.
fn concurrently<F, Fut>(rt: &Runtime, iters: u64, op: F) -> Duration
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let op = Arc::new(op);
    rt.block_on(async {
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for w in 0..CONCURRENCY {
            let op = Arc::clone(&op);
            set.spawn(async move {
                let mut i = w;
                while i < iters {
                    op(i).await;
                    i += CONCURRENCY;
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.expect("bench task");
        }
        start.elapsed()
    })
}

fn bench_store(c: &mut Criterion, rt: &Runtime, name: &str, store: Arc<dyn TaskStore>) {
    let ids = preload(rt, &store);
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));

    let mut rng = XorShift(42);
    group.bench_function("create", |b| {
        b.iter_batched(
            || completed_record(rng.task_id(), now_ms(), Some(3_600_000)),
            |r| rt.block_on(store.create(r)).expect("create"),
            criterion::BatchSize::SmallInput,
        )
    });
    let mut rng = XorShift(7);
    group.bench_function("get", |b| {
        b.iter_batched(
            || ids[(rng.next_u64() % PRELOADED as u64) as usize].clone(),
            |id| {
                let got = rt.block_on(store.get(&id, now_ms())).expect("get");
                assert!(got.is_some());
            },
            criterion::BatchSize::SmallInput,
        )
    });
    let mut rng = XorShift(99);
    group.bench_function("complete", |b| {
        b.iter_batched(
            || {
                let done = completed_record(rng.task_id(), now_ms(), Some(3_600_000));
                let mut working = done.clone();
                working.status = TaskStatus::Working;
                working.outcome = None;
                working.version = 1;
                rt.block_on(store.create(working)).expect("create");
                done
            },
            |done| rt.block_on(store.replace(done, 1)).expect("complete"),
            criterion::BatchSize::SmallInput,
        )
    });
    let seed = Arc::new(std::sync::atomic::AtomicU64::new(1));
    group.bench_function("create_x16", |b| {
        b.iter_custom(|iters| {
            let store = Arc::clone(&store);
            let base = seed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 32;
            concurrently(rt, iters, move |i| {
                let store = Arc::clone(&store);
                async move {
                    let id = format!("{:032x}", base | i);
                    store
                        .create(completed_record(id, now_ms(), Some(3_600_000)))
                        .await
                        .expect("create");
                }
            })
        })
    });
    group.bench_function("get_x16", |b| {
        b.iter_custom(|iters| {
            let store = Arc::clone(&store);
            let ids = Arc::clone(&ids);
            concurrently(rt, iters, move |i| {
                let store = Arc::clone(&store);
                let id = ids[(i.wrapping_mul(7919) % PRELOADED as u64) as usize].clone();
                async move {
                    assert!(store.get(&id, now_ms()).await.expect("get").is_some());
                }
            })
        })
    });
    group.finish();
}

fn stores(c: &mut Criterion) {
    let rt = runtime();
    bench_store(c, &rt, "memory", Arc::new(MemoryStore::new()));

    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite:{}", dir.path().join("bench.db").display());
    let sqlite = rt.block_on(SqliteStore::connect(&url)).expect("sqlite");
    bench_store(c, &rt, "sqlite_file", Arc::new(sqlite.clone()));
    rt.block_on(sqlite.close());

    #[cfg(feature = "postgres")]
    postgres(c, &rt);
    #[cfg(feature = "redis")]
    redis(c, &rt);
}

#[cfg(feature = "postgres")]
fn postgres(c: &mut Criterion, rt: &Runtime) {
    use mcp_task_layer::store::{PostgresStore, SqlOptions};
    use sqlx::{AssertSqlSafe, Connection};

    let Some(url) = std::env::var("MCP_TASKS_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("postgres: skipped (set MCP_TASKS_POSTGRES_URL; see .ci/postgres.sh)");
        return;
    };
    let table = format!("bench_{}", std::process::id());
    let options = SqlOptions::new().with_table(&table).expect("table name");
    let store = rt
        .block_on(PostgresStore::connect_with(&url, options))
        .expect("postgres");
    bench_store(c, rt, "postgres", Arc::new(store.clone()));
    rt.block_on(async {
        store.close().await;
        let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
        let drop = format!("DROP TABLE \"{table}\", \"{table}_migrations\"");
        sqlx::query(AssertSqlSafe(drop))
            .execute(&mut conn)
            .await
            .expect("drop the bench table");
    });
}

#[cfg(feature = "redis")]
fn redis(c: &mut Criterion, rt: &Runtime) {
    use mcp_task_layer::store::{RedisOptions, RedisStore};

    let Some(url) = std::env::var("MCP_TASKS_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("redis: skipped (set MCP_TASKS_REDIS_URL; see .ci/redis.sh)");
        return;
    };
    let prefix = format!("bench_{}", std::process::id());
    let options = RedisOptions::new().with_prefix(&prefix).expect("prefix");
    let store = rt
        .block_on(RedisStore::connect_with(&url, options))
        .expect("redis");
    bench_store(c, rt, "redis", Arc::new(store.clone()));
    rt.block_on(async {
        store.close().await;
        let client = ::redis::Client::open(url.as_str()).expect("url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query_async(&mut conn)
            .await
            .expect("the bench's keys");
        for chunk in keys.chunks(1000) {
            let () = ::redis::cmd("DEL")
                .arg(chunk)
                .query_async(&mut conn)
                .await
                .expect("delete the bench's keys");
        }
    });
}

criterion_group!(benches, stores);
criterion_main!(benches);
