//! `mcp-tasks gateway` as a user runs it: the binary in front of
//! tests/gateway/upstream.py (the Python mcp SDK, no tasks), served over
//! Streamable HTTP and over stdio. The upstream comes from
//! `MCP_TASKS_PYTHON` (.ci/python.sh); without it a test prints a note and
//! passes, except under `CI=true`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks");

fn python() -> Option<String> {
    match std::env::var("MCP_TASKS_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !ci,
                "CI=true but MCP_TASKS_PYTHON is not set (.ci/python.sh)"
            );
            eprintln!("note: skipping: MCP_TASKS_PYTHON is not set");
            None
        }
    }
}

fn upstream() -> String {
    format!(
        "{}/../tests/gateway/upstream.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Killed when the test ends, pass or fail.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "cli-test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    })
}

/// One POST to the gateway's /mcp as a 2026-07-28 client with `token`;
/// the JSON-RPC response (from a JSON body or the last SSE event).
fn post(addr: &str, token: &str, method: &str, name: Option<&str>, mut params: Value) -> Value {
    params["_meta"] = meta();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    let name = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: {method}\r\n{name}Authorization: Bearer {token}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let json_text = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            // A JSON body, maybe chunked: from the first brace.
            let start = rest.find('{').unwrap();
            let end = rest.rfind('}').unwrap();
            rest[start..=end].to_owned()
        });
    serde_json::from_str(&json_text).unwrap()
}

/// `tasks/get` of `task` as `token`'s caller: the JSON-RPC response.
fn get_task(addr: &str, token: &str, task: &str) -> Value {
    post(
        addr,
        token,
        "tasks/get",
        Some(task),
        json!({ "taskId": task }),
    )
}

fn result(resp: &Value) -> &Value {
    assert!(resp.get("error").is_none(), "{resp}");
    &resp["result"]
}

#[test]
fn over_http_a_long_tool_is_a_task_bound_to_its_caller() {
    let Some(py) = python() else { return };
    let (_running, addr) = listen(
        &py,
        &["--policy", "greet=sync", "--policy", "long=auto:200"],
    );

    let greet = post(
        &addr,
        "alice",
        "tools/call",
        Some("greet"),
        json!({ "name": "greet", "arguments": { "name": "Ada" } }),
    );
    assert_eq!(result(&greet)["content"][0]["text"], "Hello, Ada!");

    let created = post(
        &addr,
        "alice",
        "tools/call",
        Some("long"),
        json!({ "name": "long", "arguments": { "seconds": 1, "steps": 2 } }),
    );
    let created = result(&created);
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();

    // Another bearer cannot see alice's task (R51).
    let other = get_task(&addr, "mallory", &task);
    assert_eq!(other["error"]["code"], -32602, "{other}");

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = get_task(&addr, "alice", &task);
        let got = result(&got);
        if got["status"] == "completed" {
            assert_eq!(got["result"]["content"][0]["text"], "done after 2 steps");
            break;
        }
        assert!(Instant::now() < deadline, "{got}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn over_stdio_both_eras_are_served() {
    let Some(py) = python() else { return };
    let mut child = Command::new(BIN)
        .args(["gateway", "--stdio", "--policy", "long=auto:200"])
        .args(["--connect-wait", SLOW_START, "--"])
        .args([&py, &upstream()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let _running = Running(child);
    let mut ask = |msg: Value| -> Value {
        writeln!(input, "{msg}").unwrap();
        loop {
            let mut line = String::new();
            assert!(
                output.read_line(&mut line).unwrap() > 0,
                "the gateway closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == msg.get("id") {
                return v;
            }
        }
    };
    // 2025-11-25: initialize, then the tool list with task support.
    let init = ask(
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } }),
    );
    assert_eq!(result(&init)["protocolVersion"], "2025-11-25");
    let tools = ask(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} }));
    let long = result(&tools)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "long")
        .cloned()
        .unwrap();
    assert_eq!(long["execution"]["taskSupport"], "optional");
    // 2026-07-28 on the same pipe: a task, polled to its end.
    let created = ask(
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "long", "arguments": { "seconds": 1, "steps": 2 }, "_meta": meta() } }),
    );
    let task = result(&created)["taskId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut id = 4;
    loop {
        id += 1;
        let got = ask(
            json!({ "jsonrpc": "2.0", "id": id, "method": "tasks/get", "params": { "taskId": task, "_meta": meta() } }),
        );
        if result(&got)["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "{got}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long the gateways of these tests wait for the Python upstream to
/// start (`--connect-wait`, seconds): several start at once on a loaded
/// two-core host, where the default 10 s was seen to pass before one was up.
const SLOW_START: &str = "60";

/// `mcp-tasks ARGS` run to its end: its exit code and its stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_bad_command_line_or_store_is_one_line_and_a_non_zero_exit() {
    let (code, _) = run(&["gateway", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "no upstream command");
    let (code, err) = run(&["gateway", "--stdio", "--policy", "x=later", "--", "true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("sync, task or auto:MS"), "{err}");
    let (code, err) = run(&["gateway", "--stdio", "--store", "nosuch://x", "--", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("mcp-tasks: cannot open the task store"),
        "{err}"
    );
    let (code, err) = run(&["gateway", "--stdio", "--parked-calls", "0", "--", "true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("a whole number of at least 1"), "{err}");
    let (code, err) = run(&["gateway", "--stdio", "--upstream-starts", "0", "--", "true"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("a whole number of at least 1"), "{err}");
    let (code, err) = run(&["gateway", "--stdio", "--park-ttl", "0", "--", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        "mcp-tasks: --park-ttl 0: a positive number of seconds"
    );
    let (code, err) = run(&["gateway", "--stdio", "--connect-wait", "0", "--", "true"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        "mcp-tasks: --connect-wait 0: a positive number of seconds"
    );
}

/// `--help` names `MCP_TASKS_STORE` and never shows its value, which may
/// hold the store's password.
#[test]
fn help_never_shows_the_stores_password() {
    for command in [
        "gateway",
        "list",
        "show",
        "cancel",
        "purge",
        "stats",
        "dashboard",
    ] {
        let out = Command::new(BIN)
            .args([command, "--help"])
            .env("MCP_TASKS_STORE", "postgres://ops:hunter2@127.0.0.1/tasks")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{command} --help");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("MCP_TASKS_STORE"), "{command}: {help}");
        assert!(!help.contains("hunter2"), "{command}: {help}");
    }
}

/// The parked-call flags reach the gateway. With one waiting call a
/// client, alice's second task that asks a question fails while bob's
/// waits; with a two-second wait, alice's first call is given up and a
/// new one of hers waits again.
#[test]
fn the_parked_call_flags_bound_each_client_and_the_wait() {
    let Some(py) = python() else { return };
    let (_running, addr) = listen(
        &py,
        &[
            "--policy",
            "confirm_delete=task",
            "--parked-calls-per-owner",
            "1",
            "--park-ttl",
            "2",
        ],
    );
    let ask = |token: &str, file: &str| -> String {
        let r = post(
            &addr,
            token,
            "tools/call",
            Some("confirm_delete"),
            json!({ "name": "confirm_delete", "arguments": { "filename": file } }),
        );
        result(&r)["taskId"].as_str().unwrap().to_owned()
    };
    let first = ask("alice", "a1.txt");
    wait_status_of(&addr, "alice", &first, "input_required");
    let second = ask("alice", "a2.txt");
    let failed = wait_status_of(&addr, "alice", &second, "failed");
    assert!(
        failed
            .to_string()
            .contains("already has 1 calls waiting for answers"),
        "{failed}"
    );
    let bobs = ask("bob", "b1.txt");
    wait_status_of(&addr, "bob", &bobs, "input_required");

    // Bounded: alice's first call is given up two seconds after it parked.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let next = ask("alice", "a3.txt");
        let got = loop {
            let got = get_task(&addr, "alice", &next);
            let got = result(&got).clone();
            if got["status"] != "working" {
                break got;
            }
            assert!(Instant::now() < deadline, "{got}");
            std::thread::sleep(Duration::from_millis(50));
        };
        if got["status"] == "input_required" {
            break;
        }
        assert_eq!(got["status"], "failed", "{got}");
        assert!(Instant::now() < deadline, "alice's first call still waits");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `mcp-tasks gateway --listen 127.0.0.1:0` with `flags` in front of the
/// Python upstream, and the address it printed.
fn listen(py: &str, flags: &[&str]) -> (Running, String) {
    let mut child = Command::new(BIN)
        .args(["gateway", "--listen", "127.0.0.1:0"])
        .args(["--connect-wait", SLOW_START])
        .args(flags)
        .arg("--")
        .args([py, &upstream()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let running = Running(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|a| a.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    (running, addr)
}

/// A gateway on `store` in front of the Python upstream, its address.
fn start_gateway(py: &str, store: &str) -> (Running, String) {
    listen(
        py,
        &[
            "--store",
            store,
            "--lease-ttl",
            "1",
            "--rerun",
            "long",
            "--policy",
            "slow_compute=task",
            "--policy",
            "long=task",
            "--policy",
            "confirm_delete=task",
        ],
    )
}

fn start_task(addr: &str, tool: &str, args: Value) -> String {
    let r = post(
        addr,
        "alice",
        "tools/call",
        Some(tool),
        json!({ "name": tool, "arguments": args }),
    );
    result(&r)["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned()
}

/// Poll (at most 60 s) until alice's task's status is `status`.
fn wait_status(addr: &str, task: &str, status: &str) -> Value {
    wait_status_of(addr, "alice", task, status)
}

/// Poll (at most 60 s) until `token`'s task's status is `status`.
fn wait_status_of(addr: &str, token: &str, task: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = get_task(addr, token, task);
        let got = result(&got).clone();
        if got["status"] == status {
            return got;
        }
        assert!(Instant::now() < deadline, "{task} never {status}: {got}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_gateway_restarted_on_sqlite_keeps_finished_and_waiting_tasks_and_is_honest_about_the_rest() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let (mut first, addr) = start_gateway(&py, &store);
    let done = start_task(&addr, "long", json!({ "seconds": 0.2, "steps": 1 }));
    let stuck = start_task(
        &addr,
        "slow_compute",
        json!({ "seconds": 60, "label": "lost" }),
    );
    let again = start_task(&addr, "long", json!({ "seconds": 60, "steps": 60 }));
    let waiting = start_task(&addr, "confirm_delete", json!({ "filename": "w.txt" }));
    let finished = wait_status(&addr, &done, "completed");
    wait_status(&addr, &waiting, "input_required");
    wait_status(&addr, &again, "working");

    // A crash: SIGKILL, no drain. Its child sees its stdin close and exits.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let (_second, addr) = start_gateway(&py, &store);

    // Finished and waiting tasks read back as they were.
    assert_eq!(
        wait_status(&addr, &done, "completed")["result"],
        finished["result"]
    );
    let w = wait_status(&addr, &waiting, "input_required");
    assert_eq!(w["inputRequests"].as_object().unwrap().len(), 1);
    // A call that was in flight fails honestly: its upstream call is gone.
    let failed = wait_status(&addr, &stuck, "failed");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not marked re-runnable"),
        "{failed}"
    );
    // A re-runnable tool starts again, from the top, and finishes.
    let _ = wait_status(&addr, &again, "working");
    // Answering the waiting task: its upstream call is gone too, said so.
    let key = w["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let ack = post(
        &addr,
        "alice",
        "tasks/update",
        Some(&waiting),
        json!({
        "taskId": waiting, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } }),
    );
    assert_eq!(result(&ack)["resultType"], "complete");
    let w = wait_status(&addr, &waiting, "failed");
    assert!(
        w["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no upstream call waiting"),
        "{w}"
    );
}
