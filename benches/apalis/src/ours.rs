//! Our side: a `TaskLayer` with queued execution in front, `TaskWorker`s
//! in the worker processes (`worker.rs`).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use mcp_task_layer::store::{PostgresStore, RedisOptions, RedisStore, SqlOptions};
use mcp_task_layer::{
    Execution, JsonRpcRequest, JsonRpcResponse, Limits, TaskLayer, TaskPolicy, TaskStore,
};
use serde_json::{json, Value};
use sqlx::{AssertSqlSafe, Row};
use tower::util::BoxCloneSyncService;
use tower::ServiceExt;

use crate::side::{redis_delete_prefix, Engine};

/// The store of table or prefix `name`.
pub async fn store(engine: &Engine, name: &str) -> Arc<dyn TaskStore> {
    if engine.is_postgres() {
        let options = SqlOptions::new().with_table(name).expect("table name");
        Arc::new(
            PostgresStore::connect_with(&engine.url, options)
                .await
                .expect("postgres"),
        )
    } else {
        let options = RedisOptions::new().with_prefix(name).expect("prefix");
        Arc::new(
            RedisStore::connect_with(&engine.url, options)
                .await
                .expect("redis"),
        )
    }
}

/// A layer over `store` that queues the `work` tool's calls, up to the
/// backlog run's 100k unfinished tasks of one owner.
pub fn layer(store: Arc<dyn TaskStore>) -> TaskLayer {
    let limits = Limits {
        max_tasks_per_owner: 1_000_000,
        ..Limits::default()
    };
    TaskLayer::new(store)
        .with_tool_policy("work", TaskPolicy::Task)
        .with_execution(Execution::Queued)
        .with_limits(limits)
}

/// The job: answers at once, or after `sleep_ms`.
pub async fn handler(req: JsonRpcRequest, sleep_ms: u64) -> Result<JsonRpcResponse, Infallible> {
    if sleep_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(sleep_ms)).await;
    }
    let result = json!({ "content": [{ "type": "text", "text": "done" }] });
    Ok(JsonRpcResponse::result(req.id, result))
}

/// How the bench counts and reads what the workers did.
enum Db {
    Postgres(sqlx::PgPool),
    Redis(redis::aio::MultiplexedConnection, String),
}

pub struct Front {
    pub name: String,
    url: String,
    store: Arc<dyn TaskStore>,
    svc: BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>,
    db: Db,
    /// Task id of each job number submitted.
    ids: Mutex<Vec<(usize, String)>>,
}

impl Front {
    pub async fn open(engine: &Engine, name: String) -> Self {
        let store = store(engine, &name).await;
        let svc = tower::ServiceBuilder::new()
            .layer(layer(Arc::clone(&store)))
            .service_fn(|req| handler(req, 0));
        let db = if engine.is_postgres() {
            Db::Postgres(sqlx::PgPool::connect(&engine.url).await.expect("postgres"))
        } else {
            let client = redis::Client::open(engine.url.as_str()).expect("redis url");
            let conn = client
                .get_multiplexed_async_connection()
                .await
                .expect("redis");
            Db::Redis(conn, format!("{name}:ops:st:completed"))
        };
        Front {
            name,
            url: engine.url.clone(),
            store,
            svc: BoxCloneSyncService::new(svc),
            db,
            ids: Mutex::new(Vec::new()),
        }
    }

    pub async fn submit(&self, i: usize) {
        let req = JsonRpcRequest::new(
            i64::try_from(i).unwrap_or(0),
            "tools/call",
            json!({ "name": "work", "arguments": { "n": i }, "_meta": crate::support::meta() }),
        );
        let resp = self.svc.clone().oneshot(req).await.expect("infallible");
        let value = resp.result_value().cloned().unwrap_or(Value::Null);
        let id = value["task"]["taskId"]
            .as_str()
            .or_else(|| value["taskId"].as_str())
            .unwrap_or_else(|| panic!("a task was created: {value}"));
        self.ids.lock().expect("ids").push((i, id.to_owned()));
    }

    pub async fn completed(&self) -> u64 {
        match &self.db {
            Db::Postgres(pool) => {
                let q = format!(
                    "SELECT count(*) FROM \"{}\" WHERE status = 'completed'",
                    self.name
                );
                let n: i64 = sqlx::query(AssertSqlSafe(q))
                    .fetch_one(pool)
                    .await
                    .expect("count")
                    .get(0);
                u64::try_from(n).unwrap_or(0)
            }
            Db::Redis(conn, key) => {
                let mut conn = conn.clone();
                redis::cmd("ZCARD")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .expect("zcard")
            }
        }
    }

    pub async fn latencies(&self, first: usize) -> Vec<i64> {
        let ids: Vec<String> = self
            .ids
            .lock()
            .expect("ids")
            .iter()
            .filter(|(i, _)| *i >= first)
            .map(|(_, id)| id.clone())
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(32) {
            let gets: Vec<_> = chunk
                .iter()
                .map(|id| {
                    let (store, id) = (Arc::clone(&self.store), id.clone());
                    tokio::spawn(async move { store.get(&id, 0).await })
                })
                .collect();
            for get in gets {
                if let Ok(Ok(Some(r))) = get.await {
                    out.push(r.updated_at_ms - r.created_at_ms);
                }
            }
        }
        out
    }

    pub async fn close(&self) {
        match &self.db {
            Db::Postgres(pool) => {
                let drop = format!(
                    "DROP TABLE IF EXISTS \"{0}\", \"{0}_migrations\"",
                    self.name
                );
                sqlx::query(AssertSqlSafe(drop))
                    .execute(pool)
                    .await
                    .expect("drop the bench table");
                pool.close().await;
            }
            Db::Redis(..) => redis_delete_prefix(&self.url, &self.name).await,
        }
    }
}
