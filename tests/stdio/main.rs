//! The example server as a child process speaking MCP over its stdin and
//! stdout (`--stdio`, issue 15), driven with exact JSON-RPC lines: both
//! task eras, broken input, `notifications/cancelled`, the end of input,
//! and a relaunch on the same SQLite file.
//!
//! Nothing sleeps to wait for a state: every wait reads the server's
//! stdout with a bounded timeout (task changes arrive as
//! `subscriptions/listen` pushes, or on a blocking 2025 `tasks/result`).
//!
//! The server is `examples/server.rs`, which `cargo test --all-features`
//! builds; when it is missing, the test builds it first.
#![cfg(feature = "stdio")]

#[path = "../common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

const RELATED: &str = "io.modelcontextprotocol/related-task";
/// How long any one expected line may take.
const WAIT: Duration = Duration::from_secs(20);

/// The example server binary, built with the features it needs if missing.
fn server_binary() -> PathBuf {
    common::process::server_binary("axum,sqlite,stdio")
}

/// `_meta` of a 2026-07-28 request that declares the tasks extension.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "stdio-test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": { "form": {} },
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        },
    })
}

/// The example server over pipes; killed when dropped.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Every stdout line, as it comes; `None` once stdout has closed.
    lines: mpsc::UnboundedReceiver<String>,
    /// Messages read while looking for another one.
    stash: VecDeque<Value>,
    next: i64,
}

impl Server {
    fn start(store: &str) -> Server {
        Self::start_with(&["--store", store])
    }

    /// The server with these arguments besides `--stdio`.
    fn start_with(args: &[&str]) -> Server {
        let mut child = Command::new(server_binary())
            .arg("--stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the example server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut stdout = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = stdout.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            stash: VecDeque::new(),
            next: 0,
        }
    }

    async fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.expect("write to the server");
        stdin.flush().await.expect("flush");
    }

    async fn write(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.write_raw(&line).await;
    }

    /// Send a request; its id.
    async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next += 1;
        let id = self.next;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next stdout line as JSON, within [`WAIT`]; every line must be one
    /// whole JSON-RPC message (stdout carries nothing else).
    async fn read(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WAIT, self.lines.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no line from the server within {WAIT:?}; stash: {:?}",
                    self.stash
                )
            })?;
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
        assert_eq!(value["jsonrpc"], "2.0", "a JSON-RPC message: {line}");
        Some(value)
    }

    /// The first message (stashed or new) that `wanted` accepts; the others
    /// are kept for later.
    async fn expect(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.stash.iter().position(&wanted) {
            return self.stash.remove(at).unwrap();
        }
        loop {
            let message = self.read().await.unwrap_or_else(|| {
                panic!(
                    "stdout closed while waiting for {what}; stash: {:?}",
                    self.stash
                )
            });
            if wanted(&message) {
                return message;
            }
            self.stash.push_back(message);
        }
    }

    /// The response to request `id`.
    async fn response(&mut self, id: i64) -> Value {
        self.expect(&format!("the response to {id}"), |m| {
            m["id"] == id && m.get("method").is_none()
        })
        .await
    }

    /// Send a request and return its `result`, panicking on an error.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        let response = self.response(id).await;
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    /// A 2026-07-28 request's result.
    async fn call26(&mut self, method: &str, mut params: Value) -> Value {
        params["_meta"] = meta();
        self.call(method, params).await
    }

    /// The next `notifications/tasks` push of `task` with `status`.
    async fn push(&mut self, task: &str, status: &str) -> Value {
        self.expect(&format!("a push of {task} {status}"), |m| {
            m["method"] == "notifications/tasks"
                && m["params"]["taskId"] == task
                && m["params"]["status"] == status
        })
        .await
    }

    /// `subscriptions/listen` for `tasks`; its request id, once acknowledged.
    async fn listen(&mut self, tasks: &[&str]) -> i64 {
        let id = self
            .request(
                "subscriptions/listen",
                json!({"notifications": {"taskIds": tasks}, "_meta": meta()}),
            )
            .await;
        let ack = self
            .expect("the acknowledgement", |m| {
                m["method"] == "notifications/subscriptions/acknowledged"
                    && m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id
            })
            .await;
        assert_eq!(ack["params"]["notifications"]["taskIds"], json!(tasks));
        id
    }

    /// Wait for `task` (watched by a listen) to be in `status`: now, or at
    /// its next push.
    async fn until(&mut self, task: &str, status: &str) -> Value {
        let now = self.call26("tasks/get", json!({"taskId": task})).await;
        if now["status"] == status {
            return now;
        }
        self.push(task, status).await;
        self.call26("tasks/get", json!({"taskId": task})).await
    }

    /// Close stdin; the server must exit by itself, successfully, within
    /// `within`, and stdout must end.
    async fn close_and_wait(&mut self, within: Duration) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .expect("the server exits after stdin closes")
            .expect("wait for the server");
        assert!(status.success(), "exit status {status}");
        while let Some(message) = self.read().await {
            self.stash.push_back(message);
        }
    }

    /// The 2025-11-25 handshake, declaring form elicitation.
    async fn initialize(&mut self) {
        let result = self
            .call(
                "initialize",
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"elicitation": {"form": {}}},
                    "clientInfo": {"name": "stdio-test", "version": "1"}
                }),
            )
            .await;
        assert_eq!(result["protocolVersion"], "2025-11-25");
        assert!(result["capabilities"]["tasks"].is_object(), "{result}");
        self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Answer `confirm_delete`'s question (2026-07-28 `tasks/update`).
    async fn confirm(&mut self, task: &str, asked: &Value) {
        let keys: Vec<String> = asked["inputRequests"]
            .as_object()
            .expect("inputRequests")
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys.len(), 1, "one question: {asked}");
        let ack = self
            .call26(
                "tasks/update",
                json!({
                    "taskId": task,
                    "inputResponses": {
                        keys[0].as_str(): {"action": "accept", "content": {"confirm": true}}
                    }
                }),
            )
            .await;
        assert_eq!(ack, json!({"resultType": "complete"}));
    }
}

fn memory() -> &'static str {
    "memory"
}

mod eras;
mod relaunch;
mod stream;
