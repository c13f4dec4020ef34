//! `mcp-tasks list|show|cancel|purge|stats`, run as the built binary
//! against a store that a `TaskLayer` in this test writes through the
//! library: a SQLite file, and PostgreSQL when `MCP_TASKS_POSTGRES_URL`
//! is set (a table of its own).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{server, start, until_status};
use mcp_task_layer::{TaskLayer, TaskPolicy, TaskStatus};
use serde_json::{json, Value};

/// What a run of the binary gave.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn mcp_tasks(store: &str, args: &[&str]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-tasks"))
        .args(args)
        .env("MCP_TASKS_STORE", store)
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("the binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8"),
    }
}

async fn ok_run(store: &str, args: &[&str]) -> String {
    let run = mcp_tasks(store, args).await;
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    run.stdout
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// `tasks` (id, status) in the order the operator API documents for a
/// listing: `(created_at_ms, id)` descending.
async fn newest_first(
    layer: &TaskLayer,
    tasks: [(&String, &'static str); 3],
) -> Vec<(String, &'static str)> {
    let operator = layer.operator();
    let mut keyed = Vec::new();
    for (id, status) in tasks {
        let record = operator.get(id).await.expect("get").expect("a task");
        keyed.push((record.created_at_ms, id.clone(), status));
    }
    keyed.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    keyed
        .into_iter()
        .map(|(_, id, status)| (id, status))
        .collect()
}

/// Everything an operator does, on the store at `url`.
async fn operate_on(url: &str, store: Arc<dyn mcp_task_layer::TaskStore>) {
    let stopped = Arc::new(AtomicUsize::new(0));
    let layer = TaskLayer::new(store)
        .with_default_policy(TaskPolicy::Task)
        .with_lease_ttl(Duration::from_millis(600));
    let svc = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(server(Arc::clone(&stopped)));
    let hang = start(&svc, "alice", "hang", json!({"city": "Paris"})).await;
    let ask = start(&svc, "bob", "ask", json!({})).await;
    let done = start(&svc, "carol", "done", json!({})).await;
    until_status(&layer, &ask, TaskStatus::InputRequired).await;
    until_status(&layer, &done, TaskStatus::Completed).await;

    // list: every owner's task, newest first by `(created_at_ms, id)`
    // (three tasks started in one millisecond sort by id), one JSON
    // object per line.
    let newest_first = newest_first(
        &layer,
        [
            (&hang, "working"),
            (&ask, "input_required"),
            (&done, "completed"),
        ],
    )
    .await;
    let all = json_lines(&ok_run(url, &["list", "--json"]).await);
    let ids: Vec<&str> = all.iter().map(|t| t["id"].as_str().unwrap()).collect();
    let expected: Vec<&str> = newest_first.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, expected);
    let alice = all
        .iter()
        .find(|t| t["id"] == hang.as_str())
        .expect("alice's task");
    assert_eq!(alice["owner"], "alice");
    assert_eq!(alice["status"], "working");
    let working = json_lines(&ok_run(url, &["list", "--status", "working", "--json"]).await);
    assert_eq!(working.len(), 1);
    assert_eq!(working[0]["id"], hang.as_str());
    let bobs = json_lines(&ok_run(url, &["list", "--owner", "bob", "--json"]).await);
    assert_eq!(bobs[0]["id"], ask.as_str());
    let tools = json_lines(&ok_run(url, &["list", "--tool", "done", "--json"]).await);
    assert_eq!(tools[0]["id"], done.as_str());
    let run = mcp_tasks(url, &["list", "--limit", "1", "--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let one = json_lines(&run.stdout);
    assert_eq!(one.len(), 1);
    // The next page's cursor, on stderr as in the table (stdout stays one
    // task a line). Before, `--json` gave no way past the first page.
    let cursor = run
        .stderr
        .trim()
        .strip_prefix("more: mcp-tasks list --after ")
        .and_then(|rest| rest.strip_suffix(" ..."))
        .unwrap_or_else(|| panic!("{:?}", run.stderr));
    let next =
        json_lines(&ok_run(url, &["list", "--limit", "1", "--json", "--after", cursor]).await);
    assert_eq!(next.len(), 1);
    assert_ne!(next[0]["id"], one[0]["id"], "the second page");

    // The human table: a header and a row per task, columns aligned.
    let table = ok_run(url, &["list"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    let column = lines[0].find("STATUS").expect("a STATUS column");
    for (line, (_, status)) in lines[1..].iter().zip(&newest_first) {
        assert_eq!(line.find(status), Some(column), "{table}");
        assert!(line.contains(" ago"), "relative times: {line}");
    }

    // show: one object, arguments and what it waits for.
    let shown: Value = serde_json::from_str(&ok_run(url, &["show", &hang, "--json"]).await)
        .expect("one JSON object");
    assert_eq!(shown["arguments"], json!({"city": "Paris"}));
    assert_eq!(shown["tool"], "hang");
    let asked: Value = serde_json::from_str(&ok_run(url, &["show", &ask, "--json"]).await)
        .expect("one JSON object");
    assert_eq!(asked["status"], "input_required");
    assert_eq!(
        asked["input_requests"].as_object().map(|m| m.len()),
        Some(1)
    );
    let human = ok_run(url, &["show", &hang]).await;
    assert!(human
        .lines()
        .any(|l| l.starts_with("status") && l.ends_with("working")));

    // stats: counts, the oldest waiting task, running by worker.
    let stats: Value =
        serde_json::from_str(&ok_run(url, &["stats", "--json"]).await).expect("one JSON object");
    assert_eq!(stats["by_status"]["working"], 1);
    assert_eq!(stats["by_status"]["input_required"], 1);
    assert_eq!(stats["by_status"]["completed"], 1);
    assert_eq!(stats["oldest_input_required"]["id"], ask.as_str());
    assert!(stats["oldest_input_required"]["age_ms"].as_i64().unwrap() >= 0);
    assert_eq!(
        stats["running_by_holder"].as_object().map(|m| m.len()),
        Some(1)
    );
    assert!(ok_run(url, &["stats"]).await.contains("input_required"));

    // cancel: the handler running in this process stops.
    let said = ok_run(url, &["cancel", &hang]).await;
    assert_eq!(said.trim(), format!("cancelled {hang}"));
    until_status(&layer, &hang, TaskStatus::Cancelled).await;
    for _ in 0..1_000 {
        if stopped.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        1,
        "the handler saw the cancel"
    );
    let again = ok_run(url, &["cancel", &hang]).await;
    assert!(again.contains("already ended: cancelled"), "{again}");

    // purge: the finished tasks; the waiting one stays.
    let purged = ok_run(url, &["purge", "--older-than", "0s"]).await;
    assert_eq!(purged.trim(), "purged 2 finished tasks");
    let left = json_lines(&ok_run(url, &["list", "--json"]).await);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], ask.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let store = mcp_task_layer::store::connect(&url).await.unwrap();
    operate_on(&url, store).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_on_postgres() {
    let Some(base) = std::env::var("MCP_TASKS_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "MCP_TASKS_POSTGRES_URL is not set"
        );
        eprintln!("skipped: MCP_TASKS_POSTGRES_URL is not set");
        return;
    };
    let table = format!("cli_ops_{}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}table={table}");
    let store = mcp_task_layer::store::connect(&url).await.unwrap();
    operate_on(&url, store).await;
    // Leave nothing behind: the finished tasks are purged; the last one
    // is cancelled and purged too.
    let left = json_lines(&ok_run(&url, &["list", "--json"]).await);
    for task in left {
        ok_run(&url, &["cancel", task["id"].as_str().unwrap()]).await;
    }
    ok_run(&url, &["purge", "--older-than", "0s"]).await;
}

/// An unknown id, a dead store, a store of no known kind: one line on
/// stderr and exit code 1, never a panic.
#[tokio::test]
async fn failures_are_one_line_and_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    mcp_task_layer::store::connect(&url).await.unwrap();
    let mut cases = vec![
        (url.clone(), vec!["show", "nope"], "no task \"nope\""),
        (url.clone(), vec!["cancel", "nope"], "no task \"nope\""),
        (
            format!("sqlite:{}", dir.path().join("no/such/dir/x.db").display()),
            vec!["list"],
            "cannot open the task store",
        ),
        (
            "mysql://localhost/x".to_owned(),
            vec!["stats"],
            "cannot open the task store",
        ),
        (url.clone(), vec!["list", "--after", "zz"], "not a cursor"),
        (
            format!("sqlite:{}", dir.path().join("typo.db").display()),
            vec!["stats"],
            "no such file",
        ),
    ];
    // A password in the URL is never printed (it would land in logs).
    if cfg!(feature = "postgres") {
        let dead = "postgres://postgres:hunter2-secret@127.0.0.1:1/none".to_owned();
        cases.push((
            dead,
            vec!["list"],
            "postgres://postgres:***@127.0.0.1:1/none",
        ));
    }
    if cfg!(feature = "redis") {
        let dead = "redis://:hunter2-secret@127.0.0.1:1/0".to_owned();
        cases.push((dead, vec!["stats"], "redis://:***@127.0.0.1:1/0"));
    }
    for (store, args, says) in cases {
        let run = mcp_tasks(&store, &args).await;
        assert_eq!(run.code, 1, "{store} {args:?}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
        assert!(run.stderr.starts_with("mcp-tasks: "), "{}", run.stderr);
        assert!(run.stderr.contains(says), "{}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
    assert!(
        !dir.path().join("typo.db").exists(),
        "a mistyped path makes no new store"
    );
    let bad = mcp_tasks(&url, &["purge", "--older-than", "soon"]).await;
    assert_eq!(bad.code, 2, "a command line it does not understand");
}

/// Tasks sealed at rest show as sealed, unless the key file is given.
#[cfg(feature = "seal")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_fields_show_as_sealed_without_the_key_file() {
    use mcp_task_layer::store::{SealKeyRing, SealedStore};

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("k1:{}\n", "07".repeat(32))).unwrap();
    let ring = SealKeyRing::from_file(&keys).unwrap();
    let store = mcp_task_layer::store::connect(&url).await.unwrap();
    let stopped = Arc::new(AtomicUsize::new(0));
    let layer = TaskLayer::new(SealedStore::new(store, ring)).with_default_policy(TaskPolicy::Task);
    let svc = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(server(stopped));
    let id = start(&svc, "alice", "hang", json!({"secret": "hunter2"})).await;

    let blind = ok_run(&url, &["show", &id, "--json"]).await;
    assert!(!blind.contains("hunter2"), "{blind}");
    let blind: Value = serde_json::from_str(&blind).unwrap();
    assert_eq!(blind["arguments"], "sealed");
    assert!(blind["sealed"]
        .as_array()
        .unwrap()
        .contains(&json!("arguments")));
    let keys = keys.display().to_string();
    let opened: Value = serde_json::from_str(
        &ok_run(&url, &["show", &id, "--json", "--seal-key-file", &keys]).await,
    )
    .unwrap();
    assert_eq!(opened["arguments"], json!({"secret": "hunter2"}));
    ok_run(&url, &["cancel", &id]).await;
}
