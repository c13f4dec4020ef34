//! The sealing checks on each durable engine of the build: SQLite,
//! PostgreSQL and Redis, each reopened over the same database.

use super::*;

#[cfg(feature = "sqlite")]
mod on_sqlite {
    use mcp_task_layer::store::SqliteStore;

    use super::*;

    fn db(dir: &Path) -> String {
        format!("sqlite:{}", dir.join("tasks.db").display())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_conforms_through_sealing() {
        let dir = tempfile::tempdir().unwrap();
        let n = std::sync::atomic::AtomicUsize::new(0);
        let (dir, n) = (&dir, &n);
        conformance::run(move || async move {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let url = format!("sqlite:{}", dir.path().join(format!("c{i}.db")).display());
            SealedStore::new(SqliteStore::connect(&url).await.unwrap(), ring(&[1]))
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_never_holds_a_secret_and_the_task_still_runs() {
        let dir = tempfile::tempdir().unwrap();
        let url = db(dir.path());
        let reopen = || async { SqliteStore::connect(&url).await.unwrap() };
        secrets_never_reach_the_database(reopen, Raw::Sqlite(dir.path().to_owned())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_without_sealing_holds_the_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::connect(&db(dir.path())).await.unwrap();
        in_clear_the_secrets_are_found(store, Raw::Sqlite(dir.path().to_owned())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_keys_rotate() {
        let dir = tempfile::tempdir().unwrap();
        let url = db(dir.path());
        keys_rotate(|| async { SqliteStore::connect(&url).await.unwrap() }).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_tampered_rows_fail_closed() {
        let dir = tempfile::tempdir().unwrap();
        let url = db(dir.path());
        tampered_records_fail_closed(|| async { SqliteStore::connect(&url).await.unwrap() }).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_missing_key_after_restart_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let url = db(dir.path());
        a_missing_key_fails_closed_and_comes_back(|| async {
            SqliteStore::connect(&url).await.unwrap()
        })
        .await;
    }
}

#[cfg(feature = "postgres")]
mod on_postgres {
    use super::super::common::pg::{url, Tables};
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_conforms_through_sealing() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "sealconf");
        let t = &tables;
        conformance::run(
            move || async move { SealedStore::new(t.store(&t.next()).await, ring(&[1])) },
        )
        .await;
        tables.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_never_holds_a_secret_and_the_task_still_runs() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "sealraw");
        let table = tables.next();
        let reopen = || tables.store(&table);
        let raw = Raw::Postgres {
            url: url.clone(),
            table: table.clone(),
        };
        secrets_never_reach_the_database(reopen, raw).await;
        tables.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_without_sealing_holds_the_secrets() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "sealclear");
        let table = tables.next();
        let raw = Raw::Postgres {
            url: url.clone(),
            table: table.clone(),
        };
        in_clear_the_secrets_are_found(tables.store(&table).await, raw).await;
        tables.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_keys_rotate_and_fail_closed() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "sealkeys");
        let (a, b, c) = (tables.next(), tables.next(), tables.next());
        keys_rotate(|| tables.store(&a)).await;
        tampered_records_fail_closed(|| tables.store(&b)).await;
        a_missing_key_fails_closed_and_comes_back(|| tables.store(&c)).await;
        tables.drop_all().await;
    }
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::super::common::redis_db::{url, Prefixes};
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_conforms_through_sealing() {
        let Some(url) = url() else { return };
        let prefixes = Prefixes::new(&url, "sealconf");
        let p = &prefixes;
        conformance::run(
            move || async move { SealedStore::new(p.store(&p.next()).await, ring(&[1])) },
        )
        .await;
        prefixes.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_never_holds_a_secret_and_the_task_still_runs() {
        let Some(url) = url() else { return };
        let p = Prefixes::new(&url, "sealraw");
        let prefix = p.next();
        let reopen = || p.store(&prefix);
        let raw = Raw::Redis {
            url: url.clone(),
            prefix: prefix.clone(),
        };
        secrets_never_reach_the_database(reopen, raw).await;
        p.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_without_sealing_holds_the_secrets() {
        let Some(url) = url() else { return };
        let p = Prefixes::new(&url, "sealclear");
        let prefix = p.next();
        let raw = Raw::Redis {
            url: url.clone(),
            prefix: prefix.clone(),
        };
        in_clear_the_secrets_are_found(p.store(&prefix).await, raw).await;
        p.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_keys_rotate_and_fail_closed() {
        let Some(url) = url() else { return };
        let p = Prefixes::new(&url, "sealkeys");
        let (a, b, c) = (p.next(), p.next(), p.next());
        keys_rotate(|| p.store(&a)).await;
        tampered_records_fail_closed(|| p.store(&b)).await;
        a_missing_key_fails_closed_and_comes_back(|| p.store(&c)).await;
        p.drop_all().await;
    }
}
