//! The PostgreSQL store: conformance, replicas, connections, migrations.

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
