//! The PostgreSQL claims' own connection (issue 33): rounds keep one
//! connection, a cut one is replaced, rounds at once share the rows out,
//! and `close` closes it.

use std::time::Duration;

use mcp_task_layer::store::{ClaimQuery, Lease, PostgresStore};
use sqlx::{Connection, PgConnection};

use super::common::pg::{url, Tables};
use super::*;

/// Queued records `ids`, oldest lease end first.
async fn queue(store: &PostgresStore, ids: &[&str]) {
    for (i, id) in ids.iter().enumerate() {
        let mut r = record(id, None, T0, None);
        r.lease = Some(Lease {
            holder: Lease::QUEUED.into(),
            fence: 1,
            until_ms: T0 - 100 + i64::try_from(i).unwrap(),
        });
        store.create(r).await.unwrap();
    }
}

/// One round of at most `limit` claims by worker `w`: the ids won.
async fn round(store: &PostgresStore, limit: usize) -> mcp_task_layer::store::Result<Vec<String>> {
    let mut claim = |r: &TaskRecord| {
        let mut next = r.next_version(T0);
        next.lease = Some(Lease {
            holder: "w".into(),
            fence: r.lease.as_ref().map_or(1, |l| l.fence + 1),
            until_ms: T0 + 60_000,
        });
        Some(next)
    };
    let won = store
        .claim_runnable(ClaimQuery::new(T0, limit, &mut claim))
        .await?;
    Ok(won.iter().map(|r| r.id.clone()).collect())
}

/// The server processes of `table`'s claims connection, by the name it
/// gives itself.
async fn claim_backends(admin: &mut PgConnection, table: &str) -> Vec<i32> {
    sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
        .bind(format!("mcp-task-layer claims {table}"))
        .fetch_all(admin)
        .await
        .unwrap()
}

/// Poll (bounded) until `table` has `n` claims connections; their pids.
async fn until_backends(admin: &mut PgConnection, table: &str, n: usize) -> Vec<i32> {
    for _ in 0..200 {
        let pids = claim_backends(admin, table).await;
        if pids.len() == n {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{table} never had {n} claims connection(s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claim_rounds_keep_one_connection_and_replace_a_cut_one() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "cline");
    let table = tables.next();
    let store = tables.store(&table).await;
    let mut admin = PgConnection::connect(&url).await.unwrap();
    queue(&store, &["a", "b", "c"]).await;

    assert_eq!(round(&store, 1).await.unwrap(), ["a"]);
    let first = claim_backends(&mut admin, &table).await;
    assert_eq!(first.len(), 1, "one connection for claims");
    assert_eq!(round(&store, 1).await.unwrap(), ["b"]);
    assert_eq!(
        claim_backends(&mut admin, &table).await,
        first,
        "the next round runs on the same connection"
    );

    // Cut it between rounds, as a server restart or a proxy would.
    let cut: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first[0])
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(cut);
    until_backends(&mut admin, &table, 0).await;
    // The round on the cut connection may fail (it was used within the
    // second before, so not tested first); the next one opens another.
    let mut failed = 0;
    let won = loop {
        match round(&store, 1).await {
            Ok(won) => break won,
            Err(_) if failed == 0 => failed += 1,
            Err(e) => panic!("a second round failed too: {e}"),
        }
    };
    assert_eq!(won, ["c"], "nothing claimed twice, nothing lost");
    let second = claim_backends(&mut admin, &table).await;
    assert_eq!(second.len(), 1);
    assert_ne!(second, first, "a new connection");
    assert!(round(&store, 1).await.unwrap().is_empty(), "all three out");
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claim_rounds_at_once_share_the_rows_out() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "cboth");
    let store = tables.store(&tables.next()).await;
    queue(&store, &["a", "b", "c", "d", "e", "f"]).await;
    for _ in 0..3 {
        // One round on the claims' connection, the other on the pool.
        let (x, y) = tokio::join!(round(&store, 1), round(&store, 1));
        let (x, y) = (x.unwrap(), y.unwrap());
        assert_eq!(x.len() + y.len(), 2, "{x:?} {y:?}");
        assert_ne!(x, y);
    }
    assert!(
        round(&store, 6).await.unwrap().is_empty(),
        "all six out once"
    );
    tables.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_close_closes_the_claims_connection() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "cclose");
    let table = tables.next();
    let store = tables.store(&table).await;
    let mut admin = PgConnection::connect(&url).await.unwrap();
    queue(&store, &["a"]).await;
    assert_eq!(round(&store, 1).await.unwrap(), ["a"]);
    until_backends(&mut admin, &table, 1).await;
    tokio::time::timeout(Duration::from_secs(30), store.close())
        .await
        .expect("close does not wait for the claims' connection");
    until_backends(&mut admin, &table, 0).await;
    tables.drop_all().await;
}

/// The claims' write goes as literals in the query's text on the claims'
/// connection: a record whose every text holds quotes, backslashes,
/// dollar quotes and SQL is claimed and read back exactly, and the table
/// is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claims_write_any_text_exactly() {
    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "cquote");
    let store = tables.store(&tables.next()).await;
    let hostile = r#"it's \'' $$ $q$ "); DROP TABLE x; -- é✓ \x00"#;
    let id = format!("q'{hostile}");
    let mut r = TaskRecord::new(
        &id,
        Era::Modern,
        hostile,
        json!({ "a": hostile, hostile: [hostile] }),
        T0,
        Some(3_600_000),
    )
    .with_owner(Some(hostile.to_owned()));
    r.lease = Some(Lease {
        holder: Lease::QUEUED.into(),
        fence: 1,
        until_ms: T0 - 1,
    });
    store.create(r).await.unwrap();
    let mut claimed = None;
    let mut claim = |r: &TaskRecord| {
        let mut next = r.next_version(T0);
        next.lease = Some(Lease {
            holder: hostile.into(),
            fence: 2,
            until_ms: T0 + 60_000,
        });
        claimed = Some(next.clone());
        Some(next)
    };
    let won = store
        .claim_runnable(ClaimQuery::new(T0, 4, &mut claim))
        .await
        .unwrap();
    let claimed = claimed.expect("offered");
    assert_eq!(won.len(), 1);
    assert_eq!(*won[0], claimed);
    let stored = store.get(&id, T0).await.unwrap().expect("still there");
    assert_eq!(*stored, claimed, "written exactly");
    let listed = store
        .list(mcp_task_layer::store::ListQuery::new(
            Some(hostile),
            Era::Modern,
            10,
            T0,
        ))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "the owner column too");
    tables.drop_all().await;
}
