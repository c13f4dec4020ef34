//! The operator API on 1M tasks in PostgreSQL (issue 30): one page of a
//! listing (50 tasks, newest first) from the top, from a cursor halfway
//! down, under one status, under one tool, of one owner, and a search in
//! the arguments that the newest tasks match, one that only 111 old tasks
//! match (and, timed once, one that 111k old tasks match); and the counts
//! (`stats`). Goal: a page in under 50 ms.
//!
//! ```sh
//! source .ci/postgres.sh && mcp_pg_start
//! cargo bench -p mcp-task-layer-benches --features postgres --bench operator
//! ```
//!
//! Needs `MCP_TASKS_POSTGRES_URL`; skipped without it. The table is filled
//! once by `INSERT … SELECT generate_series` (1M rows in about a minute):
//! 90% completed, 5% working, 4% input_required, 1% failed; 10 tools,
//! 1000 owners, a task every 10 ms. `MCP_BENCH_OPERATOR_TASKS` changes the
//! count; `MCP_BENCH_KEEP=1` keeps the table (`mcp_bench_operator`) for
//! the next run instead of dropping it.
#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use mcp_task_layer::store::{Era, PostgresStore, SqlOptions, TaskQuery, TaskRecord};
use mcp_task_layer::{Operator, TaskStatus};
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection, Row};
use tokio::runtime::Runtime;

const TABLE: &str = "mcp_bench_operator";
const T0: i64 = 1_767_225_600_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The record JSON every row is made of, with `__ID__`, `__TOOL__` and
/// `__STATUS__` and the times replaced per row by SQL.
fn template() -> String {
    let mut r = TaskRecord::new(
        "__ID__",
        Era::Modern,
        "__TOOL__",
        json!({"query": "__ARG__", "limit": 10}),
        1,
        None,
    )
    .with_owner(Some("__OWNER__".into()));
    r.status = TaskStatus::Working;
    r.updated_at_ms = 2;
    serde_json::to_string(&r)
        .expect("a record serializes")
        .replace("\"working\"", "\"__STATUS__\"")
}

/// Fill the table with `n` rows unless it already has them.
async fn seed(url: &str, n: i64) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let have: i64 = sqlx::query(AssertSqlSafe(format!("SELECT count(*) FROM \"{TABLE}\"")))
        .fetch_one(&mut conn)
        .await
        .and_then(|r| r.try_get(0))
        .expect("count");
    if have == n {
        return;
    }
    sqlx::query(AssertSqlSafe(format!("TRUNCATE \"{TABLE}\"")))
        .execute(&mut conn)
        .await
        .expect("truncate");
    let started = std::time::Instant::now();
    let batch = 100_000;
    for from in (0..n).step_by(batch as usize) {
        let to = (from + batch).min(n) - 1;
        // Row i: created at T0 + 10 ms × i; status by i mod 100; tool
        // i mod 10; owner i mod 1000; its argument names the row.
        let sql = format!(
            "WITH s AS (SELECT i, md5(i::text) AS id, {T0} + i * 10 AS created, \
                 CASE WHEN i % 100 < 90 THEN 'completed' WHEN i % 100 < 95 THEN 'working' \
                      WHEN i % 100 < 99 THEN 'input_required' ELSE 'failed' END AS status, \
                 'tool' || (i % 10) AS tool, 'owner' || (i % 1000) AS owner \
               FROM generate_series({from}, {to}) AS i) \
             , r AS (SELECT s.*, \
                 replace(replace(replace(replace(replace(replace(replace($1, \
                     '\"__ID__\"', '\"' || id || '\"'), '__TOOL__', tool), '__OWNER__', owner), \
                     '__STATUS__', status), '\"created_at_ms\":1', '\"created_at_ms\":' || created), \
                     '\"updated_at_ms\":2', '\"updated_at_ms\":' || (created + 5)), \
                     '__ARG__', 'row ' || i)::json AS record FROM s) \
             INSERT INTO \"{TABLE}\" (id, owner, era, status, created_at_ms, updated_at_ms, \
                 expires_at_ms, version, record, lease_until_ms, tool_name, arguments) \
             SELECT id, owner, 'modern', status, created, created + 5, NULL, 1, record, \
                 NULL, tool, (record->'arguments')::text FROM r"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(template())
            .execute(&mut conn)
            .await
            .expect("seed");
    }
    sqlx::query(AssertSqlSafe(format!("VACUUM ANALYZE \"{TABLE}\"")))
        .execute(&mut conn)
        .await
        .expect("analyze");
    eprintln!("seeded {n} tasks in {:.1?}", started.elapsed());
}

async fn explain(url: &str, what: &str, sql: &str) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let rows = sqlx::query(AssertSqlSafe(format!("EXPLAIN (ANALYZE, BUFFERS) {sql}")))
        .fetch_all(&mut conn)
        .await
        .expect("explain");
    eprintln!("{what}:");
    for row in rows {
        eprintln!("  {}", row.get::<String, _>(0));
    }
}

fn bench(c: &mut Criterion) {
    let Some(url) = std::env::var("MCP_TASKS_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("operator: skipped (set MCP_TASKS_POSTGRES_URL; see .ci/postgres.sh)");
        return;
    };
    let n: i64 = std::env::var("MCP_BENCH_OPERATOR_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rt = runtime();
    let options = SqlOptions::new().with_table(TABLE).expect("a table name");
    let store = rt
        .block_on(PostgresStore::connect_with(&url, options))
        .expect("postgres");
    rt.block_on(seed(&url, n));
    let operator = Operator::new(store.clone());
    let middle = rt
        .block_on(operator.list(&TaskQuery::new().created_before_ms(T0 + n * 5).limit(1)))
        .expect("list")
        .next
        .expect("a task halfway down");
    let pages = [
        ("page/top", TaskQuery::new()),
        ("page/middle", TaskQuery::new().after(middle)),
        (
            "page/input_required",
            TaskQuery::new().status(TaskStatus::InputRequired),
        ),
        ("page/tool", TaskQuery::new().tool("tool3")),
        ("page/owner", TaskQuery::new().owner("owner7")),
        (
            "page/tool_and_status",
            TaskQuery::new().tool("tool3").status(TaskStatus::Working),
        ),
        // The newest tasks match: the walk stops after about 50 rows.
        ("page/search_recent", TaskQuery::new().search("row 99")),
        // 111 old tasks match (row 1234, 12340-12349, 123400-123499): the
        // trigram index finds them; the walk would pass 876k newer rows.
        ("page/search_old", TaskQuery::new().search("row 1234")),
    ];
    rt.block_on(explain(
        &url,
        "page/top",
        &format!(
            "SELECT record::text FROM \"{TABLE}\" WHERE (expires_at_ms IS NULL OR expires_at_ms > 0) \
             ORDER BY created_at_ms DESC, id DESC LIMIT 50"
        ),
    ));
    rt.block_on(explain(
        &url,
        "page/input_required",
        &format!(
            "SELECT record::text FROM \"{TABLE}\" WHERE (expires_at_ms IS NULL OR expires_at_ms > 0) \
             AND status IN ('input_required') ORDER BY created_at_ms DESC, id DESC LIMIT 50"
        ),
    ));
    rt.block_on(explain(
        &url,
        "page/search_old",
        &format!(
            "SELECT record::text FROM \"{TABLE}\" WHERE (expires_at_ms IS NULL OR expires_at_ms > 0) \
             AND arguments LIKE '%row 1234%' ORDER BY created_at_ms DESC, id DESC LIMIT 50"
        ),
    ));
    let mut group = c.benchmark_group("operator");
    group.measurement_time(Duration::from_secs(5));
    for (name, query) in pages {
        let query = query.limit(50);
        // Once to warm the cache: a cold first read may run past the
        // page's time and come back as a shorter walk.
        rt.block_on(operator.list(&query)).expect("list");
        let page = rt.block_on(operator.list(&query)).expect("list");
        assert_eq!(page.tasks.len(), 50, "{name}: a full page");
        group.bench_function(name, |b| {
            b.iter(|| rt.block_on(operator.list(&query)).expect("list"));
        });
    }
    // The worst case for both plans: 111k old tasks match (every row
    // from 100000 to 199999, and more), none of the 800k newest. The
    // index finds them all and sorts them; the walk passes 800k rows. So
    // the page runs into its time (`DEFAULT_PAGE_TIME`) and is read again
    // as a walk of `WALK_BUDGET` rows: no task, and where to go on.
    let wide = TaskQuery::new().search("row 1").limit(50);
    let page = rt.block_on(operator.list(&wide)).expect("list");
    eprintln!(
        "operator/page/search_wide_old: {} tasks, next page {}",
        page.tasks.len(),
        if page.next.is_some() { "named" } else { "none" }
    );
    group.sample_size(10);
    group.bench_function("page/search_wide_old", |b| {
        b.iter(|| rt.block_on(operator.list(&wide)).expect("list"));
    });
    group.bench_function("stats", |b| {
        b.iter(|| rt.block_on(operator.stats()).expect("stats"));
    });
    group.finish();
    if std::env::var("MCP_BENCH_KEEP").as_deref() != Ok("1") {
        rt.block_on(async {
            store.close().await;
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
            let drop = format!("DROP TABLE \"{TABLE}\", \"{TABLE}_migrations\"");
            sqlx::query(AssertSqlSafe(drop))
                .execute(&mut conn)
                .await
                .expect("drop");
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
