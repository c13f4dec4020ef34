//! Sealing at rest (`SealedStore`, feature `seal`) on SQLite and
//! PostgreSQL: a task's secret argument, answer and result never reach the
//! database in clear, the task still reads, resumes and completes, keys
//! rotate, and a record that does not open reads as failed, untouched.

// The shared checks below run on the SQL and Redis stores; with `seal`
// alone only the memory-store test uses this file.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
    allow(dead_code, unused_imports)
)]

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_task_layer::store::{SealKeyRing, SealedStore};
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, TaskLayer, TaskOwner, TaskPolicy, TaskService,
};
use serde_json::{json, Value};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

use super::*;

const ARG_SECRET: &str = "arg-secret-7f3a91c2";
const ANSWER_SECRET: &str = "answer-secret-5be0d4e8";
const RESULT_SECRET: &str = "result-secret-c29a6f1b";

fn key(n: u8) -> [u8; 32] {
    let mut k = [0u8; 32];
    for (i, b) in k.iter_mut().enumerate() {
        *b = n.wrapping_mul(31).wrapping_add(i as u8);
    }
    k
}

/// A ring of the keys `ids` (`k1` is key 1, ...), oldest first.
fn ring(ids: &[u8]) -> SealKeyRing {
    let mut ring = SealKeyRing::single(&format!("k{}", ids[0]), key(ids[0])).unwrap();
    for &n in &ids[1..] {
        ring = ring.with_key(&format!("k{n}"), key(n)).unwrap();
    }
    ring
}

type Inner = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// `vault {secret}`: works 20 ms, asks for a `code` until it has one, then
/// answers with the result secret, having checked that it was given its
/// secret argument again on the resume.
fn server() -> Inner {
    BoxCloneSyncService::new(tower::service_fn(|req: JsonRpcRequest| async move {
        let params = req
            .params
            .clone()
            .map_or(Value::Null, mcp_task_layer::Params::into_value);
        tokio::time::sleep(Duration::from_millis(20)).await;
        if params["arguments"]["secret"] != ARG_SECRET {
            return Ok(JsonRpcResponse::error(
                req.id,
                mcp_task_layer::JsonRpcError::internal("the argument did not come back"),
            ));
        }
        let result = match params["inputResponses"]["code"]["content"]["code"].as_str() {
            Some(code) => json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": format!("{RESULT_SECRET} for {}", code.len())}]
            }),
            None => json!({
                "resultType": "input_required",
                "inputRequests": {"code": {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": "Code?", "requestedSchema": {
                        "type": "object",
                        "properties": {"code": {"type": "string"}},
                        "required": ["code"]
                    }}
                }},
                "requestState": "asked"
            }),
        };
        Ok(JsonRpcResponse::result(req.id, result))
    }))
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
    })
}

struct Client {
    svc: TaskService<Inner>,
    next: i64,
}

impl Client {
    fn new(store: impl TaskStore) -> Self {
        let layer = TaskLayer::new(store).with_default_policy(TaskPolicy::Task);
        Client {
            svc: layer.layer(server()),
            next: 1,
        }
    }

    fn sealed<S: TaskStore>(store: S, keys: &[u8]) -> Self {
        Self::new(SealedStore::new(store, ring(keys)))
    }

    async fn send(&mut self, method: &str, mut params: Value) -> Value {
        params["_meta"] = meta();
        self.next += 1;
        let mut req = JsonRpcRequest::new(self.next, method, params);
        req.extensions.insert(TaskOwner::new("alice"));
        let resp = self.svc.clone().oneshot(req).await.unwrap();
        match resp.into_payload() {
            Ok(v) => v,
            Err(e) => panic!("{method} failed: {e:?}"),
        }
    }

    async fn start(&mut self) -> String {
        let r = self
            .send(
                "tools/call",
                json!({"name": "vault", "arguments": {"secret": ARG_SECRET}}),
            )
            .await;
        assert_eq!(r["resultType"], "task", "{r}");
        r["taskId"].as_str().unwrap().to_owned()
    }

    async fn get(&mut self, id: &str) -> Value {
        self.send("tasks/get", json!({"taskId": id})).await
    }

    /// Poll (real time: the store is a database) until `status`.
    async fn wait_for(&mut self, id: &str, status: &str) -> Value {
        for _ in 0..1000 {
            let body = self.get(id).await;
            if body["status"] == status {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id} never reached {status}");
    }

    async fn answer(&mut self, id: &str) {
        self.send(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {
                "code": {"action": "accept", "content": {"code": ANSWER_SECRET}}
            }}),
        )
        .await;
    }

    /// Answer a waiting task and wait until it completed; its body.
    async fn finish(&mut self, id: &str) -> Value {
        self.wait_for(id, "input_required").await;
        self.answer(id).await;
        let done = self.wait_for(id, "completed").await;
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            text,
            format!("{RESULT_SECRET} for {}", ANSWER_SECRET.len()),
            "{done}"
        );
        done
    }
}

/// Where a test's database keeps its bytes.
enum Raw {
    /// A SQLite database's folder: the file, its `-wal` and `-shm`.
    Sqlite(PathBuf),
    #[cfg(feature = "postgres")]
    /// A PostgreSQL table's rows, as text.
    Postgres { url: String, table: String },
    #[cfg(feature = "redis")]
    /// Every key under a Redis key prefix: its hash fields and values, and
    /// the members of its sorted sets.
    Redis { url: String, prefix: String },
}

impl Raw {
    async fn bytes(&self) -> Vec<u8> {
        match self {
            Raw::Sqlite(dir) => {
                let mut all = Vec::new();
                for entry in std::fs::read_dir(dir).unwrap() {
                    all.extend(std::fs::read(entry.unwrap().path()).unwrap());
                }
                assert!(!all.is_empty());
                all
            }
            #[cfg(feature = "postgres")]
            Raw::Postgres { url, table } => {
                use sqlx::{AssertSqlSafe, Connection, Row};
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                // The test's own table name: letters, digits, underscores.
                let sql = format!("SELECT t::text FROM \"{table}\" t");
                let rows = sqlx::query(AssertSqlSafe(sql))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
                assert!(!rows.is_empty());
                rows.iter()
                    .flat_map(|r| r.get::<String, _>(0).into_bytes())
                    .collect()
            }
            #[cfg(feature = "redis")]
            Raw::Redis { url, prefix } => {
                let mut conn = super::common::redis_db::connection(url).await;
                let keys: Vec<String> = ::redis::cmd("KEYS")
                    .arg(format!("{prefix}:*"))
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(!keys.is_empty());
                let mut all = Vec::new();
                for key in keys {
                    let kind: String = ::redis::cmd("TYPE")
                        .arg(&key)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    let parts: Vec<Vec<u8>> = match kind.as_str() {
                        "hash" => ::redis::cmd("HGETALL")
                            .arg(&key)
                            .query_async(&mut conn)
                            .await
                            .unwrap(),
                        "zset" => ::redis::cmd("ZRANGE")
                            .arg(&key)
                            .arg(0)
                            .arg(-1)
                            .query_async(&mut conn)
                            .await
                            .unwrap(),
                        _ => Vec::new(),
                    };
                    all.extend(key.into_bytes());
                    for part in parts {
                        all.extend(part);
                    }
                }
                all
            }
        }
    }

    /// Which of the three secrets the database holds, byte for byte.
    async fn secrets(&self) -> Vec<&'static str> {
        let bytes = self.bytes().await;
        [ARG_SECRET, ANSWER_SECRET, RESULT_SECRET]
            .into_iter()
            .filter(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()))
            .collect()
    }
}

/// The sealed record of `id` as the database holds it.
async fn stored<S: TaskStore>(store: &S, id: &str) -> TaskRecord {
    TaskRecord::clone(&store.get(id, 0).await.unwrap().unwrap())
}

/// A task with secrets runs to completion over a sealed `store`; another
/// waits for input across a restart (a new layer and store from `reopen`)
/// and then completes; the database never holds a secret.
async fn secrets_never_reach_the_database<S, F, Fut>(reopen: F, raw: Raw)
where
    S: TaskStore + Clone,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let store = reopen().await;
    let mut before = Client::sealed(store.clone(), &[1]);
    let done_id = before.start().await;
    let waiting = before.start().await;
    let done = before.finish(&done_id).await;
    let asked = before.wait_for(&waiting, "input_required").await;
    let raw_record = stored(&store, &waiting).await;
    assert!(raw_record.arguments.is_none() && raw_record.request_state.is_none());
    assert!(raw_record.sealed["arguments"].starts_with("k1:"));
    drop(before);
    drop(store);

    let mut after = Client::sealed(reopen().await, &[1]);
    assert_eq!(after.get(&done_id).await, done, "reads back the same");
    assert_eq!(after.get(&waiting).await, asked);
    after.finish(&waiting).await;
    assert_eq!(
        raw.secrets().await,
        Vec::<&str>::new(),
        "no secret in clear"
    );
}

/// The same run without sealing: the search does find what is stored in
/// clear (the result, at least).
async fn in_clear_the_secrets_are_found<S: TaskStore>(store: S, raw: Raw) {
    let mut c = Client::new(store);
    let id = c.start().await;
    c.finish(&id).await;
    let found = raw.secrets().await;
    assert!(found.contains(&RESULT_SECRET), "{found:?}");
}

/// Key rotation: a task sealed under `k1` is read, answered and completed
/// by a layer whose ring has `k2` as its newest; its writes since are
/// sealed with `k2`; a ring without `k1` no longer opens a `k1` record.
async fn keys_rotate<S, F, Fut>(reopen: F)
where
    S: TaskStore + Clone,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let store = reopen().await;
    let mut old = Client::sealed(store.clone(), &[1]);
    let id = old.start().await;
    let untouched = old.start().await;
    old.wait_for(&id, "input_required").await;
    let asked = old.wait_for(&untouched, "input_required").await;
    assert!(stored(&store, &id).await.sealed["arguments"].starts_with("k1:"));
    drop(old);

    let mut new = Client::sealed(reopen().await, &[1, 2]);
    assert_eq!(new.get(&untouched).await, asked, "k1 still opens");
    new.finish(&id).await;
    let record = stored(&store, &id).await;
    assert!(
        record.sealed.values().all(|v| v.starts_with("k2:")),
        "new writes use the newest key: {:?}",
        record.sealed.keys()
    );

    let mut k2_only = Client::sealed(reopen().await, &[2]);
    let unread = k2_only.get(&untouched).await;
    assert_eq!(unread["status"], "failed", "{unread}");
    let msg = unread["statusMessage"].as_str().unwrap();
    assert!(
        msg.contains("could not be opened") && msg.contains("\"k1\""),
        "{msg}"
    );
}

/// A tampered record and a value moved to another task read as failed,
/// saying so; nothing is written back.
async fn tampered_records_fail_closed<S, F, Fut>(reopen: F)
where
    S: TaskStore + Clone,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let store = reopen().await;
    let mut c = Client::sealed(store.clone(), &[1]);
    let done = c.start().await;
    let other = c.start().await;
    c.finish(&done).await;
    c.wait_for(&other, "input_required").await;

    // One hex digit of the result changed.
    let mut r = stored(&store, &done).await;
    let outcome = r.sealed.get_mut("outcome").unwrap();
    let last = outcome.pop().unwrap();
    outcome.push(if last == '0' { '1' } else { '0' });
    r.version += 1;
    store.replace(r.clone(), r.version - 1).await.unwrap();
    let body = c.get(&done).await;
    assert_eq!(body["status"], "failed", "{body}");
    let msg = body["statusMessage"].as_str().unwrap();
    assert!(
        msg.contains("could not be opened") && msg.contains("outcome"),
        "{msg}"
    );
    assert!(!body.to_string().contains(RESULT_SECRET));
    assert_eq!(stored(&store, &done).await, r, "nothing written back");

    // A valid sealed argument of one task copied into another's record.
    let mut victim = stored(&store, &other).await;
    let sealing = SealedStore::new(store.clone(), ring(&[1]));
    let forged = TaskRecord::new(
        "forged",
        Era::Modern,
        "vault",
        json!({"secret": "x"}),
        T0,
        None,
    )
    .with_owner(Some("alice".into()));
    sealing.create(forged).await.unwrap();
    let forged_raw = stored(&store, "forged").await;
    victim
        .sealed
        .insert("arguments".into(), forged_raw.sealed["arguments"].clone());
    victim.version += 1;
    store
        .replace(victim.clone(), victim.version - 1)
        .await
        .unwrap();
    let body = c.get(&other).await;
    assert_eq!(body["status"], "failed", "{body}");
    assert!(body["statusMessage"]
        .as_str()
        .unwrap()
        .contains("another task"));
}

/// A restart with the newest key missing: its records read as failed (the
/// stored data untouched); with the key back they read, resume and
/// complete.
async fn a_missing_key_fails_closed_and_comes_back<S, F, Fut>(reopen: F)
where
    S: TaskStore + Clone,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let store = reopen().await;
    let mut c = Client::sealed(store.clone(), &[1, 2]);
    let id = c.start().await;
    let asked = c.wait_for(&id, "input_required").await;
    let raw_before = stored(&store, &id).await;
    drop(c);

    let mut missing = Client::sealed(reopen().await, &[1]);
    let body = missing.get(&id).await;
    assert_eq!(body["status"], "failed", "{body}");
    let msg = body["statusMessage"].as_str().unwrap();
    assert!(
        msg.contains("\"k2\"") && msg.contains("not in the key ring"),
        "{msg}"
    );
    // The failed reading is not written: the record is as it was.
    assert_eq!(stored(&store, &id).await, raw_before);
    drop(missing);

    // Without a SealedStore at all: failed too, never a task without its
    // arguments (a resume would have run the handler with none).
    let mut unsealed = Client::new(reopen().await);
    let body = unsealed.get(&id).await;
    assert_eq!(body["status"], "failed", "{body}");
    let msg = body["statusMessage"].as_str().unwrap();
    assert!(msg.contains("no key ring"), "{msg}");
    let r = unsealed
        .svc
        .clone()
        .oneshot({
            let mut req = JsonRpcRequest::new(
                99,
                "tasks/update",
                json!({"taskId": id, "inputResponses": {
                    "code": {"action": "accept", "content": {"code": "x"}}
                }, "_meta": meta()}),
            );
            req.extensions.insert(TaskOwner::new("alice"));
            req
        })
        .await
        .unwrap();
    assert!(
        r.error_value().is_none(),
        "an answer to a failed task is acked"
    );
    assert_eq!(stored(&store, &id).await, raw_before, "and changes nothing");
    drop(unsealed);

    let mut back = Client::sealed(reopen().await, &[1, 2]);
    assert_eq!(back.get(&id).await, asked);
    back.finish(&id).await;
}

#[tokio::test]
async fn memory_store_conforms_through_sealing() {
    conformance::run(|| async { SealedStore::new(MemoryStore::new(), ring(&[1])) }).await;
}

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod engines;
