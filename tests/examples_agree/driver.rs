//! One example server over `--stdio`: built by cargo from this checkout,
//! started, written to and read from with exact JSON-RPC lines.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long any one expected line may take.
pub(crate) const WAIT: Duration = Duration::from_secs(20);
/// Between two `tasks/get` of a bounded poll.
const POLL_PAUSE: Duration = Duration::from_millis(25);
/// At most this many `tasks/get` in one poll (20 s of pauses).
const POLL_ROUNDS: usize = 800;

/// Both examples, built from this checkout (`cargo build --example server
/// --example rmcp_server`, fresh in a moment after `cargo test
/// --all-features`) and hard-linked into `dir`: the target directory's
/// `examples/server` may be replaced by a build of another checkout sharing
/// it, while the test runs.
pub(crate) fn build_examples(dir: &Path) -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "--message-format=json-render-diagnostics"])
        .args(["--example", "server", "--example", "rmcp_server"])
        .args(["--features", &crate::features::this_build()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit());
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cargo build --example");
    assert!(out.status.success(), "building the examples failed");
    let mut found = (None, None);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(name), Some(path)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let slot = match name {
            "server" => &mut found.0,
            "rmcp_server" => &mut found.1,
            _ => continue,
        };
        let kept = dir.join(name);
        if std::fs::hard_link(path, &kept).is_err() {
            std::fs::copy(path, &kept).expect("copy the example binary");
        }
        *slot = Some(kept);
    }
    (
        found.0.expect("cargo built examples/server.rs"),
        found.1.expect("cargo built examples/rmcp_server.rs"),
    )
}

/// An example server over pipes; killed when dropped.
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Every stdout line, as it comes.
    lines: mpsc::UnboundedReceiver<String>,
    /// Messages read while looking for another one (notifications, mostly).
    stash: VecDeque<Value>,
    next: i64,
    /// Which example, for messages.
    pub(crate) name: &'static str,
}

impl Server {
    /// `bin --stdio` on a memory store.
    pub(crate) fn start(name: &'static str, bin: &Path) -> Server {
        let mut child = Command::new(bin)
            .arg("--stdio")
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
            name,
        }
    }

    pub(crate) async fn write(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(&line).await.expect("write to the server");
        stdin.flush().await.expect("flush");
    }

    /// Send a request; its id (1, 2, 3, … in the order sent, the same for
    /// both servers).
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next += 1;
        let id = self.next;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next stdout line as JSON, within [`WAIT`].
    async fn read(&mut self) -> Value {
        let name = self.name;
        let line = tokio::time::timeout(WAIT, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("{name}: no line within {WAIT:?}; stash {:?}", self.stash))
            .unwrap_or_else(|| panic!("{name}: stdout closed; stash {:?}", self.stash));
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{name}: stdout line is not JSON ({e}): {line:?}"))
    }

    /// The first message (stashed or new) that `wanted` accepts; the others
    /// are kept.
    pub(crate) async fn expect(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.stash.iter().position(&wanted) {
            return self.stash.remove(at).unwrap();
        }
        loop {
            let message = self.read().await;
            if wanted(&message) {
                return message;
            }
            self.stash.push_back(message);
        }
    }

    /// The whole response to request `id` (`result` or `error`).
    pub(crate) async fn response(&mut self, id: i64) -> Value {
        self.expect(|m| m["id"] == id && m.get("method").is_none())
            .await
    }

    /// Send a request and wait for its response.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// `tasks/get` of `task` with `meta` until its status is one of
    /// `statuses`: bounded, with short pauses. The last response.
    pub(crate) async fn poll(&mut self, task: &str, meta: &Value, statuses: &[&str]) -> Value {
        let mut params = json!({ "taskId": task });
        if !meta.is_null() {
            params["_meta"] = meta.clone();
        }
        for _ in 0..POLL_ROUNDS {
            let got = self.call("tasks/get", params.clone()).await;
            let status = got["result"]["status"].as_str().unwrap_or_default();
            if got.get("error").is_some() || statuses.contains(&status) {
                return got;
            }
            tokio::time::sleep(POLL_PAUSE).await;
        }
        panic!("{}: task {task} never reached {statuses:?}", self.name);
    }

    /// Close stdin; the server exits by itself.
    pub(crate) async fn close(mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server exits after stdin closes")
            .expect("wait for the server");
        assert!(status.success(), "{}: exit status {status}", self.name);
    }
}
