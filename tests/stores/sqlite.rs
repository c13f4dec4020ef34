//! The SQLite store: files, tables, migrations.

use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_task_layer::store::{ListQuery, SqlOptions, SqliteStore};

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

/// With no time for a page (zero) every page is read as a bounded walk:
/// every check of the kit holds that way, and two matches 2,000 tasks
/// apart take more than one page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_pages_read_as_bounded_walks_conform() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicUsize::new(0);
    let store = || {
        let path = dir
            .path()
            .join(format!("w{}.db", n.fetch_add(1, Ordering::SeqCst)));
        async move {
            let options = SqlOptions::new().with_page_time_limit(std::time::Duration::ZERO);
            SqliteStore::connect_with(&format!("sqlite:{}", path.display()), options)
                .await
                .unwrap()
        }
    };
    conformance::run(store).await;
    let pages = conformance::operator_pages_of_rare_matches_are_bounded(store().await).await;
    assert!(pages > 1, "a walk stops: {pages} page(s)");
}

/// A page that runs past its time is interrupted (a progress handler) and
/// read as a walk of 2,000 rows: 100 old tasks of 3,000 match, and the
/// index finds them, but with 1 ns for the page its read is interrupted
/// after 1,000 steps of SQLite's machine, and the walk of the newest
/// 2,000 finds none and names where to go on. Later reads on the same
/// connections (a count of every row) are not interrupted by the page
/// that left them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_interrupts_a_page_past_its_time_and_walks() {
    use mcp_task_layer::store::TaskQuery;

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("timed.db").display());
    let quick = SqliteStore::connect(&url).await.unwrap();
    for i in 0..3_000_i64 {
        let word = if i < 100 { "zebra" } else { "horse" };
        let id = format!("t{i:04}");
        let r = TaskRecord::new(&id, Era::Modern, "t", json!({ "w": word }), T0 + i, None);
        quick.create(r).await.unwrap();
    }
    let query = TaskQuery::new().search("zebra").limit(10);
    let found = quick.operator().unwrap().find(&query, T0).await.unwrap();
    assert_eq!(found.tasks.len(), 10, "in time: from the index");
    let options = SqlOptions::new().with_page_time_limit(std::time::Duration::from_nanos(1));
    let timed = SqliteStore::connect_with(&url, options).await.unwrap();
    let found = timed.operator().unwrap().find(&query, T0).await.unwrap();
    assert!(
        found.tasks.is_empty(),
        "interrupted, then the walk of the newest 2,000"
    );
    let next = found.walked_to.expect("the walk names where it stopped");
    assert_eq!(next.position(), (T0 + 1_000, "t1000"));
    let rest = timed
        .operator()
        .unwrap()
        .find(&query.after(next), T0)
        .await
        .unwrap();
    assert_eq!(rest.tasks.len(), 10, "the next walk reaches them");
    // `stats` reads every row (thousands of steps) on the same pool.
    for _ in 0..8 {
        let stats = timed.operator().unwrap().stats(T0).await;
        assert_eq!(
            stats
                .expect("not interrupted")
                .count(mcp_task_layer::TaskStatus::Working),
            3_000
        );
    }
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
/// place: a `working` task leased under it is found as an orphan, and it
/// lists in its era only.
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
    // Migration 3's index lists per owner and era.
    let listed = store.list(ListQuery::new(Some("alice"), Era::Modern, 10, T0));
    assert_eq!(listed.await.unwrap().len(), 1);
    let other = store.list(ListQuery::new(Some("alice"), Era::Legacy, 10, T0));
    assert!(other.await.unwrap().is_empty(), "another era lists apart");
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
