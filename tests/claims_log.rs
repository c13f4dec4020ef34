//! The PostgreSQL claims' own connection logs none of its statements
//! (issue 33): its `UPDATE` carries the records, arguments included, in
//! its text. A binary of its own: `tracing`'s scoped subscriber sees
//! sqlx's log reliably only with no other test running.
#![cfg(feature = "postgres")]

mod common;

use common::pg::{url, Tables};
use mcp_task_layer::store::{ClaimQuery, Era, Lease, TaskRecord, TaskStore};
use serde_json::json;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// The claims' connection logs none of its statements: its `UPDATE`
/// carries the records, arguments included, in its text. (The pool's
/// statements are logged, without their parameters: what shows that the
/// capture sees sqlx's log at all.)
#[tokio::test]
async fn postgres_claims_log_no_record() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let Some(url) = url() else { return };
    let logs = Capture::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // The only test of this binary, on one thread: every statement runs
    // where this subscriber is the default (a test beside it, with none,
    // could have sqlx's callsites cached as uninteresting).
    let _guard = tracing::subscriber::set_default(subscriber);
    let tables = Tables::new(&url, "clog");
    let store = tables.store(&tables.next()).await;
    let secret = "sk-live-4f1c9e";
    let mut r = TaskRecord::new(
        "a",
        Era::Modern,
        "tool",
        json!({ "token": secret }),
        T0,
        None,
    );
    r.lease = Some(Lease {
        holder: Lease::QUEUED.into(),
        fence: 1,
        until_ms: T0 - 1,
    });
    store.create(r).await.unwrap();
    let mut claim = |r: &TaskRecord| {
        let mut next = r.next_version(T0);
        next.lease = Some(Lease {
            holder: "w".into(),
            fence: 2,
            until_ms: T0 + 60_000,
        });
        Some(next)
    };
    let won = store
        .claim_runnable(ClaimQuery::new(T0, 1, &mut claim))
        .await
        .unwrap();
    assert_eq!(won.len(), 1, "claimed on the claims' connection");
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("INSERT INTO"), "sqlx's log is seen: {text}");
    assert!(
        !text.contains(secret),
        "a record's arguments were logged: {text}"
    );
    tables.drop_all().await;
}
