//! Every store through the conformance suite, the SQL stores' own promises
//! (replicas sharing a table, migrations, JSON fidelity), and a layer that
//! keeps its tasks across a restart on a SQLite file.
//!
//! PostgreSQL tests read `MCP_TASKS_POSTGRES_URL` (`.ci/postgres.sh` starts
//! a private cluster and prints it). Without it they print a note and pass,
//! except under `CI=true`, where a missing URL fails them. Each PostgreSQL
//! test works in tables of its own, so they run in parallel.

mod common;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use std::sync::Arc;

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

#[tokio::test]
async fn connect_memory_and_unknown_urls() {
    let store = mcp_task_layer::store::connect("memory").await.unwrap();
    store.create(record("m1", None, T0, None)).await.unwrap();
    assert!(store.get("m1", T0).await.unwrap().is_some());
    for url in ["redis://127.0.0.1/", "tasks.db", ""] {
        match mcp_task_layer::store::connect(url).await {
            Err(Error::Unsupported(_)) => {}
            other => panic!("{url:?} must be Unsupported, got {other:?}"),
        }
    }
}

/// Several stores on one table (replicas): concurrent reapers split the
/// expired rows between them, each reported once; racing writers from
/// different stores have one winner.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
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
#[cfg(any(feature = "sqlite", feature = "postgres"))]
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
        .list(r.owner.as_deref(), r.era, None, 10, T0)
        .await
        .unwrap();
    assert_eq!(owned.len(), 1);
}

/// Tasks without an owner list apart from owned ones, newest first, paged.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
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
    let first = store.list(None, Era::Modern, None, 3, T0).await.unwrap();
    assert_eq!(ids(first.clone()), ["u3", "u2", "u1"]);
    let last = first.last().unwrap();
    let rest = store
        .list(
            None,
            Era::Modern,
            Some((last.created_at_ms, &last.id)),
            3,
            T0,
        )
        .await
        .unwrap();
    assert_eq!(ids(rest), ["u0"]);
    assert!(store
        .list(None, Era::Modern, None, 0, T0)
        .await
        .unwrap()
        .is_empty());
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use mcp_task_layer::store::{SqlOptions, SqliteStore};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_file_store_conforms() {
        let dir = tempfile::tempdir().unwrap();
        let n = AtomicUsize::new(0);
        conformance::run(|| {
            let path = dir
                .path()
                .join(format!("c{}.db", n.fetch_add(1, Ordering::SeqCst)));
            async move {
                SqliteStore::connect(&format!("sqlite:{}", path.display()))
                    .await
                    .unwrap()
            }
        })
        .await;
    }

    #[tokio::test]
    async fn sqlite_memory_store_conforms() {
        conformance::run(|| async { SqliteStore::connect("sqlite::memory:").await.unwrap() }).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_stores_on_one_file_act_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("shared.db").display());
        let mut replicas = Vec::new();
        for _ in 0..3 {
            replicas.push(SqliteStore::connect(&url).await.unwrap());
        }
        replicas_share_one_table(replicas).await;
    }

    #[tokio::test]
    async fn sqlite_keeps_json_exactly() {
        records_round_trip_exactly(SqliteStore::connect("sqlite::memory:").await.unwrap()).await;
        unowned_tasks_list_apart(SqliteStore::connect("sqlite::memory:").await.unwrap()).await;
    }

    #[tokio::test]
    async fn sqlite_tables_are_separate_and_migrations_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("t.db").display());
        let a = SqliteStore::connect_with(&url, SqlOptions::new().with_table("a").unwrap())
            .await
            .unwrap();
        let b = SqliteStore::connect_with(&url, SqlOptions::new().with_table("b").unwrap())
            .await
            .unwrap();
        a.create(record("x", None, T0, None)).await.unwrap();
        assert!(b.get("x", T0).await.unwrap().is_none(), "tables are apart");
        a.migrate().await.unwrap();
        a.migrate().await.unwrap();
        assert!(
            a.get("x", T0).await.unwrap().is_some(),
            "migrate keeps rows"
        );
        assert_eq!((a.table(), b.table()), ("a", "b"));
        assert!(SqlOptions::new().with_table("no-dashes").is_err());
        assert!(SqlOptions::new().with_table("x; DROP TABLE a").is_err());
    }

    #[tokio::test]
    async fn sqlite_without_migrations_fails_until_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("m.db").display());
        let store = SqliteStore::connect_with(&url, SqlOptions::new().with_migrations(false))
            .await
            .unwrap();
        match store.get("x", T0).await {
            Err(Error::Backend(e)) => assert!(e.to_string().contains("no such table"), "{e}"),
            other => panic!("an unmigrated table must fail as Backend, got {other:?}"),
        }
        store.migrate().await.unwrap();
        assert!(store.get("x", T0).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn sqlite_records_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("keep.db").display());
        let r = record("kept", Some("alice"), T0, Some(60_000));
        {
            let store = SqliteStore::connect(&url).await.unwrap();
            store.create(r.clone()).await.unwrap();
            store.close().await;
        }
        let store = mcp_task_layer::store::connect(&url).await.unwrap();
        assert_eq!(*store.get("kept", T0).await.unwrap().unwrap(), r);
    }

    /// A table made by the first schema (no lease column) is migrated in
    /// place, and a `working` task leased under it is found as an orphan.
    #[tokio::test]
    async fn sqlite_upgrades_a_first_schema_table_and_finds_its_orphans() {
        use mcp_task_layer::store::Lease;
        use sqlx::{Connection, Executor};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        let mut r = record("old", Some("alice"), T0, None);
        r.lease = Some(Lease {
            holder: "gone".into(),
            fence: 1,
            until_ms: T0 + 1_000,
        });
        {
            let mut conn =
                sqlx::SqliteConnection::connect(&format!("sqlite:{}?mode=rwc", path.display()))
                    .await
                    .unwrap();
            // The schema of migration 1, as released.
            conn.execute(
                "CREATE TABLE mcp_tasks (id TEXT PRIMARY KEY NOT NULL, owner TEXT, \
                 era TEXT NOT NULL, status TEXT NOT NULL, created_at_ms INTEGER NOT NULL, \
                 updated_at_ms INTEGER NOT NULL, expires_at_ms INTEGER, \
                 version INTEGER NOT NULL, record TEXT NOT NULL); \
                 CREATE TABLE mcp_tasks_migrations (version INTEGER PRIMARY KEY NOT NULL, \
                 applied_at_ms INTEGER NOT NULL); \
                 INSERT INTO mcp_tasks_migrations VALUES (1, 0);",
            )
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO mcp_tasks VALUES ('old', 'alice', 'modern', 'working', $1, $1, \
                 NULL, 1, $2)",
            )
            .bind(T0)
            .bind(serde_json::to_string(&r).unwrap())
            .execute(&mut conn)
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
        let store = SqliteStore::connect(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        assert_eq!(*store.get("old", T0).await.unwrap().unwrap(), r);
        assert!(store.orphans(T0 + 500, 10).await.unwrap().is_empty());
        let found = store.orphans(T0 + 2_000, 10).await.unwrap();
        assert_eq!(found.len(), 1, "the leased task of the old schema");
        assert_eq!(*found[0], r);
    }

    #[tokio::test]
    async fn sqlite_bad_paths_are_backend_errors() {
        match SqliteStore::connect("sqlite:/nonexistent-dir/x/y.db").await {
            Err(Error::Backend(e)) => {
                let _ = e.to_string();
            }
            other => panic!("expected a Backend error, got {other:?}"),
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use mcp_task_layer::store::{PostgresStore, SqlOptions};

    use super::common::pg::{url, Tables};
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_store_conforms() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "conf");
        let t = &tables;
        conformance::run(move || async move { t.store(&t.next()).await }).await;
        tables.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_replicas_act_as_one() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "replicas");
        let table = tables.next();
        // Three replicas start at once and migrate the same new table.
        let (a, b, c) = tokio::join!(
            tables.store(&table),
            tables.store(&table),
            tables.store(&table)
        );
        replicas_share_one_table(vec![a, b, c]).await;
        tables.drop_all().await;
    }

    #[tokio::test]
    async fn postgres_keeps_json_exactly() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "json");
        records_round_trip_exactly(tables.store(&tables.next()).await).await;
        unowned_tasks_list_apart(tables.store(&tables.next()).await).await;
        tables.drop_all().await;
    }

    /// The server ends every connection of the store (a restart, a proxy's
    /// idle timeout); after a pause the store reads and writes again.
    #[tokio::test]
    async fn postgres_store_survives_dropped_connections() {
        use sqlx::{Connection, Row};

        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "drop");
        let app = tables.prefix.clone();
        let sep = if url.contains('?') { '&' } else { '?' };
        let store = PostgresStore::connect_with(
            &format!("{url}{sep}application_name={app}"),
            SqlOptions::new().with_table(tables.next()).unwrap(),
        )
        .await
        .unwrap();
        let r = record("k", None, T0, None);
        store.create(r.clone()).await.unwrap();
        let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
        let killed: i64 = sqlx::query(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
        )
        .bind(&app)
        .fetch_one(&mut admin)
        .await
        .unwrap()
        .get(0);
        assert!(killed >= 1, "the store's connections were found");
        tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
        assert!(store.get("k", T0).await.unwrap().is_some());
        store.replace(r.next_version(T0 + 1), 1).await.unwrap();
        tables.drop_all().await;
    }

    #[tokio::test]
    async fn postgres_migrates_once_and_reconnects() {
        use sqlx::{AssertSqlSafe, Connection, Row};

        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "migrate");
        let table = tables.next();
        let store = tables.store(&table).await;
        store.create(record("x", None, T0, None)).await.unwrap();
        store.migrate().await.unwrap();
        store.close().await;
        let store = tables.store(&table).await;
        assert!(store.get("x", T0).await.unwrap().is_some());
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let sql = format!("SELECT count(*), max(version) FROM \"{table}_migrations\"");
        let row = sqlx::query(AssertSqlSafe(sql))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let (rows, newest): (i64, i64) = (row.get(0), row.get(1));
        assert!(newest >= 2, "every migration applied");
        assert_eq!(rows, newest, "each migration recorded once");
        tables.drop_all().await;
    }
}

/// A layer over a SQLite file runs tasks, is dropped, and a new layer over
/// the same file serves them: the finished one reads back the same, and the
/// one waiting for input completes when answered.
#[cfg(feature = "sqlite")]
mod restart {
    use std::convert::Infallible;
    use std::time::Duration;

    use mcp_task_layer::store::SqliteStore;
    use mcp_task_layer::{
        JsonRpcRequest, JsonRpcResponse, TaskLayer, TaskOwner, TaskPolicy, TaskService,
    };
    use serde_json::{json, Value};
    use tower::util::BoxCloneSyncService;
    use tower::{Layer, ServiceExt};

    type Inner = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

    /// `ask`: works 1 ms, then asks for `name` until it has it and greets.
    fn server() -> Inner {
        BoxCloneSyncService::new(tower::service_fn(|req: JsonRpcRequest| async move {
            let params = req.params.clone().unwrap_or(Value::Null);
            tokio::time::sleep(Duration::from_millis(20)).await;
            let name = params["inputResponses"]["name"]["content"]["name"].as_str();
            let result = match name {
                Some(name) => json!({
                    "resultType": "complete",
                    "content": [{"type": "text", "text": format!("Hello, {name}!")}]
                }),
                None => json!({
                    "resultType": "input_required",
                    "inputRequests": {"name": {
                        "method": "elicitation/create",
                        "params": {"mode": "form", "message": "Your name?", "requestedSchema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"]
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
        fn new(store: SqliteStore) -> Self {
            let layer = TaskLayer::new(store).with_default_policy(TaskPolicy::Task);
            Client {
                svc: layer.layer(server()),
                next: 1,
            }
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
                .send("tools/call", json!({"name": "ask", "arguments": {"x": 1}}))
                .await;
            assert_eq!(r["resultType"], "task", "{r}");
            r["taskId"].as_str().unwrap().to_owned()
        }

        async fn get(&mut self, id: &str) -> Value {
            self.send("tasks/get", json!({"taskId": id})).await
        }

        /// Poll (real time: the store is a file) until `status`.
        async fn wait_for(&mut self, id: &str, status: &str) -> Value {
            for _ in 0..500 {
                let body = self.get(id).await;
                if body["status"] == status {
                    return body;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("task {id} never reached {status}");
        }

        async fn answer(&mut self, id: &str, name: &str) {
            self.send(
                "tasks/update",
                json!({"taskId": id, "inputResponses": {
                    "name": {"action": "accept", "content": {"name": name}}
                }}),
            )
            .await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_layer_on_the_same_file_serves_the_old_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("tasks.db").display());

        let store = SqliteStore::connect(&url).await.unwrap();
        let mut before = Client::new(store.clone());
        let waiting = before.start().await;
        let finished = before.start().await;
        let asked = before.wait_for(&waiting, "input_required").await;
        before.wait_for(&finished, "input_required").await;
        before.answer(&finished, "Ada").await;
        let done = before.wait_for(&finished, "completed").await;
        assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
        drop(before);
        store.close().await;
        drop(store);

        let mut after = Client::new(SqliteStore::connect(&url).await.unwrap());
        assert_eq!(
            after.get(&finished).await,
            done,
            "a finished task reads the same"
        );
        assert_eq!(
            after.get(&waiting).await,
            asked,
            "a waiting task reads the same"
        );
        after.answer(&waiting, "Grace").await;
        let done = after.wait_for(&waiting, "completed").await;
        assert_eq!(done["result"]["content"][0]["text"], "Hello, Grace!");
    }
}
