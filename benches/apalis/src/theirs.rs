//! apalis's side: `push` in front, `WorkerBuilder` workers in the worker
//! processes, with the settings apalis documents for throughput: a batch
//! per fetch as large as the worker's concurrency, and (PostgreSQL)
//! `LISTEN`/`NOTIFY` to wake workers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apalis::prelude::*;
use apalis_postgres::{PgPool, PostgresStorage};
use apalis_redis::RedisStorage;
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::side::{redis_delete_prefix, Engine};
use crate::CONCURRENCY;

/// The job: its number.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub n: usize,
}

/// How long a job sleeps in this worker process (ms).
pub static SLEEP_MS: AtomicU64 = AtomicU64::new(0);

async fn job(_job: Job) -> Result<(), BoxDynError> {
    let ms = SLEEP_MS.load(Ordering::Relaxed);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    Ok(())
}

/// apalis's schema, once per database.
pub async fn prepare(engine: &Engine) {
    if engine.is_postgres() {
        let pool = PgPool::connect(&engine.url).await.expect("postgres");
        PostgresStorage::setup(&pool).await.expect("apalis schema");
        pool.close().await;
    }
}

fn pg_config(queue: &str) -> apalis_postgres::Config {
    apalis_postgres::Config::default()
        .queue(queue)
        .batch_size(CONCURRENCY)
}

fn redis_config(queue: &str) -> apalis_redis::Config {
    apalis_redis::Config::default()
        .queue(queue)
        .batch_size(CONCURRENCY)
}

/// Run one apalis worker on queue `name` until the process ends.
pub async fn work(engine: &Engine, name: &str) {
    let worker_name = format!("{name}-{}", std::process::id());
    if engine.is_postgres() {
        let pool = PgPool::connect(&engine.url).await.expect("postgres");
        let backend = PostgresStorage::<Job>::new(&pool)
            .with_config(pg_config(name))
            .with_pubsub();
        crate::worker::ready();
        let worker = WorkerBuilder::new(worker_name)
            .backend(backend)
            .concurrency(CONCURRENCY)
            .build(job);
        worker.run().await.expect("apalis worker");
    } else {
        let conn = apalis_redis::connect(engine.url.as_str())
            .await
            .expect("redis");
        let backend = RedisStorage::<Job, _>::new(conn).with_config(redis_config(name));
        crate::worker::ready();
        let worker = WorkerBuilder::new(worker_name)
            .backend(backend)
            .concurrency(CONCURRENCY)
            .build(job);
        worker.run().await.expect("apalis worker");
    }
}

enum Store {
    Postgres(PostgresStorage<Job>, PgPool),
    Redis(RedisStorage<Job, ConnectionManager>, ConnectionManager),
}

pub struct Front {
    pub name: String,
    url: String,
    store: Store,
}

impl Front {
    pub async fn open(engine: &Engine, name: String) -> Self {
        let store = if engine.is_postgres() {
            let pool = PgPool::connect(&engine.url).await.expect("postgres");
            Store::Postgres(
                PostgresStorage::new(&pool).with_config(pg_config(&name)),
                pool,
            )
        } else {
            let conn = apalis_redis::connect(engine.url.as_str())
                .await
                .expect("redis");
            Store::Redis(
                RedisStorage::new(conn.clone()).with_config(redis_config(&name)),
                conn,
            )
        };
        Front {
            name,
            url: engine.url.clone(),
            store,
        }
    }

    pub async fn submit(&self, n: usize) {
        match &self.store {
            Store::Postgres(s, _) => s.clone().push(Job { n }).await.expect("push"),
            Store::Redis(s, _) => s.clone().push(Job { n }).await.expect("push"),
        }
    }

    /// Queue `n` jobs in bulk pushes of 1,000.
    pub async fn push_all(&self, n: usize) {
        for start in (0..n).step_by(1000) {
            let jobs: Vec<Job> = (start..n.min(start + 1000)).map(|n| Job { n }).collect();
            match &self.store {
                Store::Postgres(s, _) => s.clone().push_bulk(jobs).await.expect("push"),
                Store::Redis(s, _) => s.clone().push_bulk(jobs).await.expect("push"),
            }
        }
    }

    pub async fn completed(&self) -> u64 {
        match &self.store {
            Store::Postgres(_, pool) => {
                let n: i64 = sqlx::query(
                    "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 AND status = 'Done'",
                )
                .bind(&self.name)
                .fetch_one(pool)
                .await
                .expect("count")
                .get(0);
                u64::try_from(n).unwrap_or(0)
            }
            Store::Redis(s, conn) => {
                let mut conn = conn.clone();
                redis::cmd("SCARD")
                    .arg(s.get_config().done_jobs_set())
                    .query_async(&mut conn)
                    .await
                    .expect("scard")
            }
        }
    }

    /// `run_at` to `done_at` of the jobs pushed after the first `first`
    /// (PostgreSQL only: apalis-redis does not record when a job ended).
    pub async fn latencies(&self, first: usize) -> Option<Vec<i64>> {
        let Store::Postgres(_, pool) = &self.store else {
            return None;
        };
        let rows = sqlx::query(
            "SELECT (extract(epoch FROM done_at - run_at) * 1000)::bigint FROM apalis.jobs \
             WHERE job_type = $1 AND done_at IS NOT NULL ORDER BY run_at OFFSET $2",
        )
        .bind(&self.name)
        .bind(i64::try_from(first).unwrap_or(0))
        .fetch_all(pool)
        .await
        .ok()?;
        Some(rows.iter().map(|r| r.get::<i64, _>(0)).collect())
    }

    pub async fn close(&self) {
        match &self.store {
            Store::Postgres(_, pool) => {
                sqlx::query("DELETE FROM apalis.jobs WHERE job_type = $1")
                    .bind(&self.name)
                    .execute(pool)
                    .await
                    .expect("delete the bench's jobs");
                sqlx::query("DELETE FROM apalis.workers WHERE worker_type = $1")
                    .bind(&self.name)
                    .execute(pool)
                    .await
                    .expect("delete the bench's workers");
                pool.close().await;
            }
            Store::Redis(..) => redis_delete_prefix(&self.url, &self.name).await,
        }
    }
}
