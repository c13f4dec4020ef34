//! The durable stores: the same model with restarts, in real time, on
//! every durable store the build has.

use super::*;

use mcp_task_layer::TaskStore;
use proptest::test_runner::{Config, TestRunner};
use tower::Layer;

/// Cases per durable store, each of 1-23 operations (about one in nine a
/// restart).
const CASES: u32 = 24;
/// Renewed every 200 ms: a live runner loses its task to the recovery
/// only if its thread stalls for 400 ms.
const LEASE: Duration = Duration::from_millis(600);
const REAP: Duration = Duration::from_millis(50);
const REAL: Timing = Timing {
    slow_ms: 400,
    advance_ms: [1, 20, 80, 250],
};

/// A database that outlives the processes of one case.
pub(super) enum Db {
    #[cfg(feature = "sqlite")]
    Sqlite(String),
    #[cfg(feature = "postgres")]
    Postgres { url: String, table: String },
    #[cfg(feature = "redis")]
    Redis { url: String, prefix: String },
}

/// One process's connection to it.
enum Conn {
    #[cfg(feature = "sqlite")]
    Sqlite(mcp_task_layer::store::SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(mcp_task_layer::store::PostgresStore),
    #[cfg(feature = "redis")]
    Redis(mcp_task_layer::store::RedisStore),
}

impl Db {
    async fn open(&self) -> (TaskLayer, Conn) {
        match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite(url) => {
                let store = mcp_task_layer::store::SqliteStore::connect(url)
                    .await
                    .unwrap();
                (common::layer_on(store.clone()), Conn::Sqlite(store))
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { url, table } => {
                // As `pg::Tables::store`, which names and drops the table.
                let options = mcp_task_layer::store::SqlOptions::new()
                    .with_table(table)
                    .unwrap()
                    .with_max_connections(4);
                let store = mcp_task_layer::store::PostgresStore::connect_with(url, options)
                    .await
                    .unwrap();
                (common::layer_on(store.clone()), Conn::Postgres(store))
            }
            #[cfg(feature = "redis")]
            Db::Redis { url, prefix } => {
                // As `redis_db::Prefixes::store`, which names and deletes the keys.
                let options = mcp_task_layer::store::RedisOptions::new()
                    .with_prefix(prefix)
                    .unwrap();
                let store = mcp_task_layer::store::RedisStore::connect_with(url, options)
                    .await
                    .unwrap();
                (common::layer_on(store.clone()), Conn::Redis(store))
            }
        }
    }
}

impl Conn {
    /// Close every connection, waiting for statements in flight: nothing
    /// this process still runs reaches the database after this.
    async fn close(&self) {
        match self {
            #[cfg(feature = "sqlite")]
            Conn::Sqlite(s) => s.close().await,
            #[cfg(feature = "postgres")]
            Conn::Postgres(s) => s.close().await,
            #[cfg(feature = "redis")]
            Conn::Redis(s) => s.close().await,
        }
    }
}

fn wall_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

impl Model {
    /// The database as the dead process left it, read before the new
    /// process starts its background work: a task can only be
    /// `working` there if it was last seen `working` (or never seen);
    /// those are orphans, and keep the end of their dead runner's lease.
    async fn note_restart(&mut self, store: &dyn TaskStore) {
        let now = wall_ms();
        for (id, s) in &mut self.tasks {
            let record = store
                .get(id, now)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("task {id} survives a restart"));
            if record.status != TaskStatus::Working {
                continue;
            }
            let last = s.last.as_ref().and_then(|b| b["status"].as_str());
            assert!(
                matches!(last, None | Some("working")),
                "task {id}, last seen {last:?}, is working after a restart"
            );
            if s.orphan_until.is_none() {
                let lease = record.lease.as_ref().expect("a working task has a lease");
                s.orphan_until = Some(lease.until_ms);
            }
        }
    }

    /// Read every task through the new process: one that waited for
    /// input or had finished reads back exactly as before.
    async fn reread(&mut self, c: &Client) {
        for (id, s) in &mut self.tasks {
            let before = s.last.clone();
            observe(c, id, s).await;
            if let Some(before) = before.filter(|b| b["status"] != "working") {
                assert_eq!(
                    s.last.as_ref(),
                    Some(&before),
                    "a task waiting for input or finished is unchanged by a restart"
                );
            }
        }
    }

    /// Every orphan ends: the recovery fails it once the dead runner's
    /// lease has run out (observed through the layer's events, for at
    /// most 5 s, about eight leases).
    async fn settle_orphans(&mut self, c: &mut Client) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        for (id, s) in &mut self.tasks {
            let Some(until) = s.orphan_until else {
                continue;
            };
            loop {
                observe(c, id, s).await;
                if s.terminal.is_some() {
                    break;
                }
                match tokio::time::timeout_at(deadline, c.events.recv()).await {
                    Ok(Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
                    Ok(Err(e)) => panic!("event channel closed: {e}"),
                    Err(_) => panic!(
                        "task {id} still works 5 s after its process died (lease until {})",
                        stamp(until)
                    ),
                }
            }
        }
    }
}

/// One case: each stretch of operations between restarts is one
/// process, on a runtime of its own.
fn run(db: &Db, ops: &[Op]) {
    let mut model = Model::new(REAL);
    let lives: Vec<&[Op]> = ops.split(|op| matches!(op, Op::Restart)).collect();
    for (n, life) in lives.iter().enumerate() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (layer, conn) = db.open().await;
            let layer = layer.with_lease_ttl(LEASE).with_reap_interval(REAP);
            if n > 0 {
                model.note_restart(layer.store().as_ref()).await;
            }
            // As a server does at start-up: reaper and orphan recovery.
            layer
                .layer(common::server(Arc::default()))
                .start_background_work();
            let (mut c, other) = clients(layer);
            model.servers.push(Arc::clone(&c.seen));
            if n > 0 {
                model.reread(&c).await;
            }
            for op in *life {
                model.apply(&c, &other, op).await;
            }
            if n + 1 == lives.len() {
                model.settle_orphans(&mut c).await;
                model.finish(&c).await;
            } else {
                // What the next process must read back unchanged.
                for (id, s) in &mut model.tasks {
                    observe(&c, id, s).await;
                }
            }
            // The process dies here.
            conn.close().await;
        });
        drop(runtime);
    }
}

/// Run [`CASES`] random cases, each on the database `db` makes for it.
pub(super) fn check(db: impl Fn() -> (Db, Box<dyn std::any::Any>)) {
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&ops(true, 24), |ops| {
        let (db, _keep) = db();
        run(&db, &ops);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn invariants_hold_on_sqlite_across_restarts() {
    check(|| {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
        (Db::Sqlite(url), Box::new(dir))
    });
}

#[cfg(feature = "postgres")]
#[test]
fn invariants_hold_on_postgres_across_restarts() {
    let Some(url) = common::pg::url() else {
        return;
    };
    let tables = common::pg::Tables::new(&url, "hardening");
    check(|| {
        let db = Db::Postgres {
            url: url.clone(),
            table: tables.next(),
        };
        (db, Box::new(()))
    });
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(tables.drop_all());
}

#[cfg(feature = "redis")]
#[test]
fn invariants_hold_on_redis_across_restarts() {
    let Some(url) = common::redis_db::url() else {
        return;
    };
    let prefixes = common::redis_db::Prefixes::new(&url, "hardening");
    check(|| {
        let db = Db::Redis {
            url: url.clone(),
            prefix: prefixes.next(),
        };
        (db, Box::new(()))
    });
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(prefixes.drop_all());
}
