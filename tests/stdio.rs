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

#[tokio::test]
async fn r41_r56_modern_tasks_create_ask_update_resume_cancel_with_pushes() {
    let mut s = Server::start(memory());
    let created = s
        .call26(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "notes.txt"}}),
        )
        .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();

    let listen = s.listen(&[&task]).await;
    let asked = s.until(&task, "input_required").await;
    assert_eq!(
        asked["inputRequests"]["confirm"]["params"]["message"],
        "Delete notes.txt?"
    );
    s.confirm(&task, &asked).await;
    // R56: the resume and the end are pushed, without resultType.
    let done = s.push(&task, "completed").await;
    assert!(done["params"].get("resultType").is_none(), "{done}");
    assert_eq!(
        s.response(listen).await["result"],
        json!({"resultType": "complete"}),
        "the listen answers once its task has ended"
    );
    let body = s.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(body["status"], "completed");
    assert_eq!(body["result"]["content"][0]["text"], "Deleted notes.txt.");

    // Cancel (R41, R44): acknowledged, then pushed as cancelled.
    let slow = s
        .call26(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "c"}}),
        )
        .await;
    let slow = slow["taskId"].as_str().unwrap().to_owned();
    let listen = s.listen(&[&slow]).await;
    let ack = s.call26("tasks/cancel", json!({"taskId": slow})).await;
    assert_eq!(ack, json!({"resultType": "complete"}), "R41");
    s.push(&slow, "cancelled").await;
    s.response(listen).await;
    assert_eq!(
        s.call26("tasks/get", json!({"taskId": slow})).await["status"],
        "cancelled"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn r65_r66_r70_r75_legacy_tasks_with_an_elicitation_on_tasks_result() {
    let mut s = Server::start(memory());
    s.initialize().await;
    let created = s
        .call(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = created["task"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["task"]["status"], "working");

    // R65: a flat Task.
    let got = s.call("tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["taskId"], task.as_str());
    assert!(
        got.get("task").is_none() && got.get("result").is_none(),
        "{got}"
    );

    // R75: the question comes on the pipes while tasks/result waits, and
    // the answer goes back on the same pipes.
    let waiting = s.request("tasks/result", json!({"taskId": task})).await;
    let ask = s
        .expect("elicitation/create", |m| {
            m["method"] == "elicitation/create"
        })
        .await;
    assert_eq!(
        ask["params"]["_meta"][RELATED]["taskId"],
        task.as_str(),
        "R75"
    );
    assert_eq!(ask["params"]["message"], "Delete a.txt?");
    let ask_id = ask["id"].as_str().expect("a string id").to_owned();
    assert!(ask_id.starts_with("srv-"), "{ask_id}");
    s.write(&json!({
        "jsonrpc": "2.0",
        "id": ask_id,
        "result": {"action": "accept", "content": {"confirm": true}}
    }))
    .await;
    let result = s.response(waiting).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "Deleted a.txt.",
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"][RELATED]["taskId"],
        task.as_str(),
        "R66"
    );

    // R52, R74: the stream's owner lists its task.
    let listed = s.call("tasks/list", json!({})).await;
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(ids.contains(&task.as_str()), "{listed}");

    // R70: cancel returns the cancelled Task, and it sticks.
    let slow = s
        .call(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}, "task": {}}),
        )
        .await;
    let slow = slow["task"]["taskId"].as_str().unwrap().to_owned();
    let cancelled = s.call("tasks/cancel", json!({"taskId": slow})).await;
    assert_eq!(cancelled["status"], "cancelled", "R70");
    assert_eq!(
        s.call("tasks/get", json!({"taskId": slow})).await["status"],
        "cancelled"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn broken_lines_get_their_errors_and_the_stream_goes_on() {
    let mut s = Server::start(memory());
    s.write_raw(b"this is not json\n").await;
    let e = s.expect("-32700", |m| m["error"].is_object()).await;
    assert_eq!(e["id"], Value::Null);
    assert_eq!(e["error"]["code"], -32700);

    s.write_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}\n")
        .await;
    let e = s
        .expect("-32700 for non-UTF-8", |m| m["error"].is_object())
        .await;
    assert_eq!(e["error"]["code"], -32700, "not UTF-8: {e}");

    s.write_raw(b"[1,2]\n{\"jsonrpc\":\"2.0\",\"id\":9,\"params\":{}}\n")
        .await;
    let e = s.expect("-32600", |m| m["error"].is_object()).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    let e = s.expect("-32600 with id", |m| m["error"].is_object()).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(9), json!(-32600))
    );

    // Over the 4 MiB line limit: refused, and the next line is served.
    let mut long =
        b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\",\"params\":{\"pad\":\"".to_vec();
    long.resize(long.len() + 4 * 1024 * 1024 + 1, b'x');
    long.extend_from_slice(b"\"}}\n");
    s.write_raw(&long).await;
    let e = s
        .expect("refused long line", |m| m["error"].is_object())
        .await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    s.initialize().await;
    assert!(
        s.stash.is_empty(),
        "nothing else was written: {:?}",
        s.stash
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn notifications_cancelled_drops_an_in_flight_request_but_not_its_task() {
    let mut s = Server::start(memory());
    s.initialize().await;
    let created = s
        .call(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}, "task": {}}),
        )
        .await;
    let task = created["task"]["taskId"].as_str().unwrap().to_owned();
    // A tasks/result blocks while the task runs: it is in flight.
    let waiting = s.request("tasks/result", json!({"taskId": task})).await;
    s.write(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": waiting, "reason": "user"}
    }))
    .await;
    // Read in order: ping's response comes after the cancel was handled.
    let ping = s.request("ping", json!({})).await;
    s.response(ping).await;
    assert_eq!(
        s.call("tasks/get", json!({"taskId": task})).await["status"],
        "working",
        "R46: cancelling a request does not cancel its task"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
    assert!(
        !s.stash.iter().any(|m| m["id"] == waiting),
        "a cancelled request gets no response: {:?}",
        s.stash
    );
}

#[tokio::test]
async fn eof_lets_the_request_in_flight_finish_then_the_server_exits() {
    let mut s = Server::start(memory());
    let running = s
        .call26(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "left running"}}),
        )
        .await;
    assert_eq!(running["resultType"], "task");
    // Answered inside the 100 ms window, after stdin has closed.
    let last = s
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.05, "label": "last"}, "_meta": meta()}),
        )
        .await;
    s.close_and_wait(Duration::from_secs(10)).await;
    let answer = s.response(last).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "computed last in 0.05s",
        "{answer}"
    );
}

#[tokio::test]
async fn a_relaunch_on_the_same_sqlite_file_finds_and_resumes_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let mut first = Server::start(&store);
    let created = first
        .call26(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "kept.txt"}}),
        )
        .await;
    let task = created["taskId"].as_str().unwrap().to_owned();
    first.listen(&[&task]).await;
    let asked = first.until(&task, "input_required").await;
    first.close_and_wait(Duration::from_secs(10)).await;

    let mut second = Server::start(&store);
    let again = second.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(again["status"], "input_required", "{again}");
    assert_eq!(again["inputRequests"], asked["inputRequests"]);
    let listen = second.listen(&[&task]).await;
    second.confirm(&task, &again).await;
    second.push(&task, "completed").await;
    second.response(listen).await;
    let done = second.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(done["result"]["content"][0]["text"], "Deleted kept.txt.");
    second.close_and_wait(Duration::from_secs(10)).await;
}

/// `progress_job` (issue 19) on a SQLite file sealed with
/// `--seal-key-file`: the handler's "step k of n" messages come in order
/// (the first with the creating answer), the task completes, and the
/// database files hold none of its argument.
#[cfg(all(feature = "seal", feature = "sqlite"))]
#[tokio::test]
async fn progress_job_says_its_step_and_a_sealed_file_keeps_its_argument_secret() {
    const SECRET: &str = "stdio-secret-2b7e15";
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(
        &keys,
        format!("old-1:{}\nnew-2:{}\n", "ab".repeat(32), "cd".repeat(32)),
    )
    .unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let store = format!("sqlite:{}", db.join("tasks.db").display());
    let mut s = Server::start_with(&["--store", &store, "--seal-key-file", keys.to_str().unwrap()]);
    let created = s
        .call26(
            "tools/call",
            json!({"name": "progress_job", "arguments": {"steps": 4, "note": SECRET}}),
        )
        .await;
    assert_eq!(created["statusMessage"], "step 1 of 4", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let listen = s.listen(&[&task]).await;
    let mut steps = Vec::new();
    loop {
        let push = s
            .expect("a push", |m| {
                m["method"] == "notifications/tasks" && m["params"]["taskId"] == task.as_str()
            })
            .await;
        if push["params"]["status"] == "completed" {
            assert!(push["params"].get("statusMessage").is_none(), "{push}");
            break;
        }
        let message = push["params"]["statusMessage"].as_str().unwrap();
        let k: u32 = message
            .strip_prefix("step ")
            .and_then(|m| m.strip_suffix(" of 4"))
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("{message}"));
        steps.push(k);
    }
    // Coalesced under load, never out of order.
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    assert!(
        !steps.is_empty() && steps.iter().all(|k| (2..=4).contains(k)),
        "{steps:?}"
    );
    s.response(listen).await;
    let done = s.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(done["result"]["content"][0]["text"], "Finished 4 steps.");
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(&db).unwrap() {
        bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    assert!(bytes.len() > 4096, "the database was written");
    assert!(
        !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the argument reached the file in clear"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}
