//! The PostgreSQL store: conformance, replicas, connections, migrations.

use mcp_task_layer::store::{ClaimQuery, ListQuery, PostgresStore, SqlOptions};

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

/// A page that would read past its time is read as a walk of at most
/// `WALK_BUDGET` rows (`with_page_time_limit`; zero walks at once): every
/// check of the kit holds that way too, and two matches that far apart
/// take more than one page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pages_read_as_bounded_walks_conform() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "walks");
    let t = &tables;
    let walking = move |table: String| {
        let url = url.clone();
        async move {
            let options = SqlOptions::new()
                .with_table(table)
                .unwrap()
                .with_max_connections(4)
                .with_page_time_limit(std::time::Duration::ZERO);
            PostgresStore::connect_with(&url, options).await.unwrap()
        }
    };
    conformance::run(|| walking(t.next())).await;
    let pages =
        conformance::operator_pages_of_rare_matches_are_bounded(walking(t.next()).await).await;
    assert!(
        pages > 1,
        "a walk past WALK_BUDGET rows stops: {pages} page(s)"
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_announces_partial_answers_but_not_renewals() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "notify");
    announces_every_visible_write(&tables.store(&tables.next()).await).await;
    tables.drop_all().await;
}

/// A table at schema 3 (as released: the trigger that skipped a write
/// keeping `status` and `updated_at_ms`) is migrated in place: its rows list
/// per era, and its feed announces a partial answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_upgrades_a_third_schema_table() {
    use sqlx::{AssertSqlSafe, Connection, Executor};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "v3");
    let t = tables.next();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    // Migrations 1 to 3, as released.
    let schema = format!(
        r#"CREATE TABLE "{t}" (id text COLLATE "C" PRIMARY KEY, owner text COLLATE "C",
            era text NOT NULL, status text NOT NULL, created_at_ms bigint NOT NULL,
            updated_at_ms bigint NOT NULL, expires_at_ms bigint, version bigint NOT NULL,
            record json NOT NULL, lease_until_ms bigint);
        CREATE INDEX "{t}_owner_idx" ON "{t}" (owner, created_at_ms, id) WHERE owner IS NOT NULL;
        CREATE INDEX "{t}_unowned_idx" ON "{t}" (created_at_ms, id) WHERE owner IS NULL;
        CREATE INDEX "{t}_expiry_idx" ON "{t}" (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
        CREATE INDEX "{t}_lease_idx" ON "{t}" (lease_until_ms) WHERE lease_until_ms IS NOT NULL;
        CREATE FUNCTION "{t}_notify"() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN
            PERFORM pg_notify('{t}_changes', NEW.version::text || ' ' || NEW.status || ' ' || NEW.id);
            RETURN NULL; END $f$;
        CREATE TRIGGER "{t}_changes" AFTER UPDATE ON "{t}" FOR EACH ROW
            WHEN (OLD.status IS DISTINCT FROM NEW.status
            OR OLD.updated_at_ms IS DISTINCT FROM NEW.updated_at_ms)
            EXECUTE FUNCTION "{t}_notify"();
        CREATE TABLE "{t}_migrations" (version bigint PRIMARY KEY, applied_at_ms bigint NOT NULL);
        INSERT INTO "{t}_migrations" VALUES (1, 0), (2, 0), (3, 0);"#
    );
    conn.execute(AssertSqlSafe(schema)).await.unwrap();
    let mut old = record("old", Some("alice"), T0, None);
    old.era = Era::Legacy;
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO \"{t}\" VALUES ('old', 'alice', 'legacy', 'working', $1, $1, NULL, 1, \
         $2::json, NULL)"
    )))
    .bind(T0)
    .bind(serde_json::to_string(&old).unwrap())
    .execute(&mut conn)
    .await
    .unwrap();
    let store = tables.store(&t).await;
    let legacy = store
        .list(ListQuery::new(Some("alice"), Era::Legacy, 10, T0))
        .await
        .unwrap();
    assert_eq!(legacy.len(), 1);
    assert_eq!(*legacy[0], old);
    let modern = store.list(ListQuery::new(Some("alice"), Era::Modern, 10, T0));
    assert!(modern.await.unwrap().is_empty(), "another era lists apart");
    announces_every_visible_write(&store).await;
    tables.drop_all().await;
}

/// A worker's claim passes by the rows another claim holds instead of
/// waiting for them (`FOR UPDATE SKIP LOCKED`), and takes them once they
/// are free again (issue 18).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claims_skip_rows_another_claim_holds() {
    use mcp_task_layer::store::Lease;
    use sqlx::{AssertSqlSafe, Connection};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "claim");
    let table = tables.next();
    let store = tables.store(&table).await;
    for (id, until_ms) in [("oldest", T0 - 3), ("next", T0 - 2)] {
        let mut r = record(id, None, T0, None);
        r.lease = Some(Lease {
            holder: Lease::QUEUED.into(),
            fence: 1,
            until_ms,
        });
        store.create(r).await.unwrap();
    }
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut held = other.begin().await.unwrap();
    let lock = format!("SELECT 1 FROM \"{table}\" WHERE id = 'oldest' FOR UPDATE");
    sqlx::query(AssertSqlSafe(lock))
        .execute(&mut *held)
        .await
        .unwrap();
    let mut claim = |r: &TaskRecord| {
        let mut next = r.next_version(T0);
        next.lease = Some(Lease {
            holder: "w".into(),
            fence: 2,
            until_ms: T0 + 60_000,
        });
        Some(next)
    };
    let won = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        store.claim_runnable(ClaimQuery::new(T0, 2, &mut claim)),
    )
    .await
    .expect("a held row is passed by, not waited for")
    .unwrap();
    let ids: Vec<_> = won.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["next"]);
    held.rollback().await.unwrap();
    let won = store
        .claim_runnable(ClaimQuery::new(T0, 2, &mut claim))
        .await
        .unwrap();
    let ids: Vec<_> = won.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["oldest"], "free again, the row is claimed");
    tables.drop_all().await;
}

/// Compare-and-sets made at the same time go out as one group (one
/// statement for all of them when they are of distinct rows, issue 33):
/// each caller still hears its own outcome, the won ones are written
/// whole, and a lost one changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_writes_made_together_each_get_their_own_outcome() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "together");
    let store = tables.store(&tables.next()).await;
    for i in 0..40 {
        store
            .create(record(&format!("r{i:02}"), None, T0, None))
            .await
            .unwrap();
    }
    // Rows 0..30 expect the version they have (won), 30..40 a later one
    // (lost: changed), and ten ids have no row (lost: not found).
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..50 {
        let store = store.clone();
        writes.spawn(async move {
            let id = if i < 40 {
                format!("r{i:02}")
            } else {
                format!("gone{i}")
            };
            let mut next = record(&id, None, T0, None).next_version(T0 + 1);
            // Quotes, a backslash and SQL: the group's statement carries
            // the rows as literals.
            next.status_message = Some(format!("written by {i}: it's \\ $$ '); --"));
            let expected = if (30..40).contains(&i) { 7 } else { 1 };
            (i, store.replace(next, expected).await)
        });
    }
    while let Some(joined) = writes.join_next().await {
        let (i, outcome) = joined.unwrap();
        match i {
            0..30 => assert!(outcome.is_ok(), "write {i}: {outcome:?}"),
            30..40 => assert!(
                matches!(outcome, Err(Error::Conflict)),
                "write {i}: {outcome:?}"
            ),
            _ => assert!(
                matches!(outcome, Err(Error::NotFound)),
                "write {i}: {outcome:?}"
            ),
        }
    }
    for i in 0..40 {
        let r = store.get(&format!("r{i:02}"), T0).await.unwrap().unwrap();
        if i < 30 {
            assert_eq!(r.version, 2, "row {i}");
            assert_eq!(
                r.status_message.as_deref(),
                Some(&*format!("written by {i}: it's \\ $$ '); --"))
            );
        } else {
            assert_eq!(
                (r.version, r.status_message.as_deref()),
                (1, None),
                "row {i}"
            );
        }
    }
    tables.drop_all().await;
}
