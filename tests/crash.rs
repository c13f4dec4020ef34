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

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_task_layer::client::HttpTransport;
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse};
use serde_json::{json, Value};
use tower::ServiceExt;

/// The example server binary, built with this test's features if missing.
fn server_binary() -> PathBuf {
    // target/<profile>/deps/crash-<hash> → target/<profile>/examples/server
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile_dir.join("examples").join("server");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        let features = if cfg!(feature = "redis") {
            "axum,sqlite,redis"
        } else {
            "axum,sqlite"
        };
        cmd.args(["build", "--example", "server", "--features", features])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo build --example server");
        assert!(status.success(), "building the example server failed");
    }
    bin
}

/// A running example server; SIGKILLed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// On the store `--store store` names.
    fn start(store: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(server_binary())
            .args(["--port", "0", "--lease-ttl", "1", "--store", store])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the example server");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the server's first line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Server { child, url }
    }

    /// SIGKILL: no shutdown code runs.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap the server");
    }

    fn client(&self) -> Client {
        Client {
            http: HttpTransport::new(&self.url)
                .expect("url")
                .with_bearer("alice")
                .expect("token"),
            next: 0,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    http: HttpTransport,
    next: i64,
}

impl Client {
    async fn send(&mut self, method: &str, mut params: Value) -> JsonRpcResponse {
        self.next += 1;
        params["_meta"] = common::meta(true);
        let req = JsonRpcRequest::new(self.next, method, params);
        self.http
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    async fn start(&mut self, tool: &str, arguments: Value) -> String {
        let resp = self
            .send("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        let result = resp.result_value().expect("tools/call result");
        assert_eq!(result["resultType"], "task", "{tool} became a task");
        result["taskId"].as_str().expect("taskId").to_owned()
    }

    async fn get(&mut self, id: &str) -> Value {
        let resp = self.send("tasks/get", json!({"taskId": id})).await;
        resp.result_value()
            .unwrap_or_else(|| panic!("tasks/get {id}: {resp:?}"))
            .clone()
    }

    /// Poll (real time: the server is another process) until `id` is in
    /// `status`, for at most 30 s.
    async fn wait_for(&mut self, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let body = self.get(id).await;
            if body["status"] == status {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "task {id} never reached {status}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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

/// The answer `confirm_delete` asks for.
async fn confirm(c: &mut Client, id: &str, asked: &Value) {
    let keys: Vec<&String> = asked["inputRequests"]
        .as_object()
        .expect("inputRequests")
        .keys()
        .collect();
    assert_eq!(keys.len(), 1, "one question: {asked}");
    let resp = c
        .send(
            "tasks/update",
            json!({
                "taskId": id,
                "inputResponses": {
                    keys[0].as_str(): {"action": "accept", "content": {"confirm": true}}
                }
            }),
        )
        .await;
    assert!(resp.result_value().is_some(), "tasks/update: {resp:?}");
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
