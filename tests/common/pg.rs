//! A PostgreSQL test database: the URL `.ci/postgres.sh` exports, and
//! tables of a test's own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use mcp_task_layer::store::{PostgresStore, SqlOptions};

/// The test database, or `None` (after a note) when not configured
/// outside CI.
pub fn url() -> Option<String> {
    super::server_url(
        "MCP_TASKS_POSTGRES_URL",
        "PostgreSQL",
        "source .ci/postgres.sh; mcp_pg_start",
    )
}

/// Fresh, unique table names for one test, dropped when it ends well.
pub struct Tables {
    url: String,
    pub prefix: String,
    n: AtomicUsize,
    made: Mutex<Vec<String>>,
}

impl Tables {
    pub fn new(url: &str, test: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Tables {
            url: url.to_owned(),
            prefix: format!("t_{test}_{}_{nanos}", std::process::id()),
            n: AtomicUsize::new(0),
            made: Mutex::new(Vec::new()),
        }
    }

    pub fn next(&self) -> String {
        let name = format!("{}_{}", self.prefix, self.n.fetch_add(1, Ordering::SeqCst));
        self.made.lock().unwrap().push(name.clone());
        name
    }

    pub async fn store(&self, table: &str) -> PostgresStore {
        let options = SqlOptions::new()
            .with_table(table)
            .unwrap()
            .with_max_connections(4);
        PostgresStore::connect_with(&self.url, options)
            .await
            .unwrap()
    }

    pub async fn drop_all(self) {
        use sqlx::{AssertSqlSafe, Connection};
        let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
        for t in self.made.into_inner().unwrap() {
            // Names come from `next`: letters, digits and underscores.
            for sql in [
                format!("DROP TABLE IF EXISTS \"{t}\", \"{t}_migrations\""),
                format!("DROP FUNCTION IF EXISTS \"{t}_notify\"()"),
            ] {
                sqlx::query(AssertSqlSafe(sql))
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
        }
    }
}
