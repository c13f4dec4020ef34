//! The example server on a SQLite file (and, with the `redis` feature, on
//! Redis: `--store redis://…`) is killed with SIGKILL while it has tasks
//! `working`, `input_required` and `completed`, and started again on the
//! same store: every task reads back as before, the one that was running
//! is recovered by the server's policy once its lease runs out, and the one
//! waiting for input completes when answered (issue 5).
//!
//! The server is `examples/server.rs`, which `cargo test --all-features`
//! builds; when it is missing (`cargo test --test crash`), the test builds
//! it first.
#![cfg(all(feature = "axum", feature = "sqlite", feature = "http-client"))]

mod common;

use common::process::Process;
use common::remote::Remote;
use serde_json::{json, Value};

/// The example server's features this test needs.
const FEATURES: &str = if cfg!(feature = "redis") {
    "axum,sqlite,redis"
} else {
    "axum,sqlite"
};

/// A running example server on the store `--store store` names, with a
/// 1 s lease; SIGKILLed when dropped.
struct Server(Process);

impl Server {
    fn start(store: &str, extra: &[&str]) -> Server {
        let args: Vec<String> = ["--port", "0", "--lease-ttl", "1", "--store", store]
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect();
        Server(Process::start(FEATURES, &args))
    }

    /// SIGKILL: no shutdown code runs.
    fn kill(self) {
        self.0.kill();
    }

    fn client(&self) -> Remote {
        Remote::new(self.0.url())
    }
}

/// Three tasks in three states, then SIGKILL; their bodies before the kill.
async fn three_tasks_then_kill(store: &str, seconds: f64, extra: &[&str]) -> [(String, Value); 3] {
    let server = Server::start(store, extra);
    let mut c = server.client();
    let running = c
        .start(
            "slow_compute",
            json!({"seconds": seconds, "label": "running"}),
        )
        .await;
    let asking = c
        .start("confirm_delete", json!({"filename": "notes.txt"}))
        .await;
    let done = c
        .start("slow_compute", json!({"seconds": 0.2, "label": "done"}))
        .await;
    let asking_body = c.wait_for(&asking, "input_required").await;
    let done_body = c.wait_for(&done, "completed").await;
    let running_body = c.get(&running).await;
    assert_eq!(running_body["status"], "working");
    server.kill();
    [
        (running, running_body),
        (asking, asking_body),
        (done, done_body),
    ]
}

/// The answer `confirm_delete` asks for: one question.
async fn confirm(c: &mut Remote, id: &str, asked: &Value) {
    let questions = asked["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(questions.len(), 1, "one question: {asked}");
    c.confirm(id, asked).await;
}

/// The running task fails (the default recovery) once its lease has run
/// out; the others read back as before, and the waiting one completes.
async fn fails_the_running_task_and_keeps_the_others(store: &str) {
    let [(running, _), (asking, asking_body), (done, done_body)] =
        three_tasks_then_kill(store, 600.0, &[]).await;

    let server = Server::start(store, &[]);
    let mut c = server.client();
    assert_eq!(
        c.get(&done).await,
        done_body,
        "completed reads back as before"
    );
    assert_eq!(
        c.get(&asking).await,
        asking_body,
        "input_required reads back as before"
    );
    // Recovered by the default policy once its lease (1 s) has run out.
    let failed = c.wait_for(&running, "failed").await;
    assert_eq!(failed["error"]["code"], -32603);
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("restarted"), "{message}");

    confirm(&mut c, &asking, &asking_body).await;
    let completed = c.wait_for(&asking, "completed").await;
    assert!(
        completed["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("notes.txt"),
        "{completed}"
    );
    server.kill();
}

/// `--recovery rerun`: the running task runs again from its stored request.
async fn rerun_finishes_the_running_task(store: &str) {
    let rerun = ["--recovery", "rerun"];
    let [(running, _), (asking, asking_body), (done, done_body)] =
        three_tasks_then_kill(store, 2.0, &rerun).await;

    let server = Server::start(store, &rerun);
    let mut c = server.client();
    assert_eq!(c.get(&done).await, done_body);
    assert_eq!(c.get(&asking).await, asking_body);
    // Re-run from its stored request: the same arguments, run to the end.
    let completed = c.wait_for(&running, "completed").await;
    let text = completed["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("running"), "{text}");

    confirm(&mut c, &asking, &asking_body).await;
    c.wait_for(&asking, "completed").await;
    server.kill();
}

fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite:{}", dir.path().join("tasks.db").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_then_restart_fails_the_running_task_and_keeps_the_others() {
    let dir = tempfile::tempdir().unwrap();
    fails_the_running_task_and_keeps_the_others(&sqlite_url(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_then_restart_with_rerun_finishes_the_running_task() {
    let dir = tempfile::tempdir().unwrap();
    rerun_finishes_the_running_task(&sqlite_url(&dir)).await;
}

/// `--store redis://…?prefix=…`: the shared test server, a prefix of the
/// test's own.
#[cfg(feature = "redis")]
mod redis {
    use super::common::redis_db::{url, Prefixes};
    use super::*;

    fn store(prefixes: &Prefixes) -> String {
        let sep = if prefixes.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}prefix={}", prefixes.url, prefixes.next())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_sigkill_then_restart_fails_the_running_task_and_keeps_the_others() {
        let Some(url) = url() else { return };
        let prefixes = Prefixes::new(&url, "crash");
        fails_the_running_task_and_keeps_the_others(&store(&prefixes)).await;
        prefixes.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_sigkill_then_restart_with_rerun_finishes_the_running_task() {
        let Some(url) = url() else { return };
        let prefixes = Prefixes::new(&url, "crashrerun");
        rerun_finishes_the_running_task(&store(&prefixes)).await;
        prefixes.drop_all().await;
    }
}
