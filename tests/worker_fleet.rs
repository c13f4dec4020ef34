//! A worker fleet in processes of its own (issue #18): one front
//! (`--role front`) and two workers (`--role worker`) of the example
//! server over one store, PostgreSQL or Redis (with their change feeds)
//! or one SQLite file (polling), and what SIGTERM and SIGKILL of a worker do.
//!
//! Handler runs are counted across processes in each process's
//! `--run-log` (a line `TOOL TASK_ID MS` per run, `cancelled TASK_ID MS` per
//! handler stopped by its cancellation). PostgreSQL tests read
//! `MCP_TASKS_POSTGRES_URL` (see tests/stores/main.rs); each makes a table
//! of its own.
#![cfg(all(
    feature = "axum",
    feature = "http-client",
    feature = "sqlite",
    feature = "postgres",
    feature = "redis"
))]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::process::Process;
use common::remote::Remote;
use serde_json::json;

const FEATURES: &str = "axum,http-client,sqlite,postgres,redis";

/// How every process of a fleet is started.
struct Fleet<'a> {
    store: &'a str,
    recovery: &'a str,
    /// Seconds; heartbeats (a third of it) bound a cancel's way without a
    /// change feed.
    lease: &'a str,
}

impl Fleet<'_> {
    fn start(&self, role: &[&str], log: &Path) -> Process {
        let log = log.display().to_string();
        let shared = [
            "--store",
            self.store,
            "--recovery",
            self.recovery,
            "--lease-ttl",
            self.lease,
            "--drain-secs",
            "1",
            "--run-log",
            &log,
        ];
        let args: Vec<String> = shared.iter().chain(role).map(|s| (*s).to_owned()).collect();
        Process::start(FEATURES, &args)
    }

    fn front(&self, log: &Path) -> Process {
        self.start(&["--role", "front", "--port", "0"], log)
    }

    fn worker(&self, log: &Path) -> Process {
        let worker = self.start(&["--role", "worker", "--concurrency", "8"], log);
        assert_eq!(worker.first_line, "worker ready");
        worker
    }
}

/// Runs per task id of `tool` in the run logs at `paths`.
fn runs(paths: &[&Path], tool: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for path in paths {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let mut fields = line.split(' ');
            if let (Some(t), Some(id)) = (fields.next(), fields.next()) {
                if t == tool {
                    *counts.entry(id.to_owned()).or_default() += 1;
                }
            }
        }
    }
    counts
}

/// Poll the run logs (real time: other processes write them) until `tool`
/// has a line for `id`, for at most 30 s.
async fn wait_for_run(paths: &[&Path], tool: &str, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !runs(paths, tool).contains_key(id) {
        assert!(Instant::now() < deadline, "{tool} never ran for {id}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Which of the workers' logs has a run of `id`.
fn runner_of(paths: &[&Path], tool: &str, id: &str) -> Option<usize> {
    paths.iter().position(|p| runs(&[p], tool).contains_key(id))
}

struct Logs {
    _dir: tempfile::TempDir,
    front: PathBuf,
    workers: [PathBuf; 2],
}

impl Logs {
    fn new() -> Logs {
        let dir = tempfile::tempdir().unwrap();
        Logs {
            front: dir.path().join("front.log"),
            workers: [dir.path().join("w1.log"), dir.path().join("w2.log")],
            _dir: dir,
        }
    }
    fn workers(&self) -> [&Path; 2] {
        [&self.workers[0], &self.workers[1]]
    }
}

/// The fleet scenario on one store: R28 a queued task stays `working` with
/// no worker and never runs on the front; R44 a task cancelled before any
/// claim never runs; 200 tasks each run exactly once over both workers; an
/// input round answered on the front resumes on a worker (R35); a cancel
/// reaches a handler running on a worker within a heartbeat (R44).
async fn fleet(store: &str) {
    let logs = Logs::new();
    let fleet = Fleet {
        store,
        recovery: "rerun",
        lease: "3",
    };
    let front = fleet.front(&logs.front);
    let mut c = Remote::new(front.url());

    let first = c.start("slow_compute", json!({"seconds": 0.3})).await;
    let never = c.start("slow_compute", json!({"seconds": 60})).await;
    c.cancel(&never).await;
    // No worker yet: the task stays queued, whatever time passes.
    for _ in 0..10 {
        assert_eq!(c.get(&first).await["status"], "working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let w1 = fleet.worker(&logs.workers[0]);
    let w2 = fleet.worker(&logs.workers[1]);
    c.wait_for(&first, "completed").await;

    let mut ids = vec![first];
    for i in 0..200 {
        let label = format!("t{i}");
        ids.push(
            c.start("slow_compute", json!({"seconds": 0.15, "label": label}))
                .await,
        );
    }
    for id in &ids {
        c.wait_for(id, "completed").await;
    }
    let ran = runs(&logs.workers(), "slow_compute");
    for id in &ids {
        assert_eq!(ran.get(id), Some(&1), "task {id} ran exactly once");
    }
    assert!(
        !ran.contains_key(&never),
        "a task cancelled while queued never runs"
    );
    let [a, b] = logs.workers().map(|p| runs(&[p], "slow_compute").len());
    assert!(a > 0 && b > 0, "both workers ran tasks: {a} and {b}");
    assert!(
        std::fs::read_to_string(&logs.front)
            .unwrap_or_default()
            .is_empty(),
        "the front ran nothing"
    );

    let asking = c
        .start("confirm_delete", json!({"filename": "notes.txt"}))
        .await;
    let asked = c.wait_for(&asking, "input_required").await;
    c.confirm(&asking, &asked).await;
    let done = c.wait_for(&asking, "completed").await;
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("notes.txt"), "{text}");
    assert_eq!(
        runs(&logs.workers(), "confirm_delete").get(&asking),
        Some(&2),
        "two rounds, two runs"
    );

    let long = c.start("slow_compute", json!({"seconds": 60})).await;
    wait_for_run(&logs.workers(), "slow_compute", &long).await;
    let cancelled_at = Instant::now();
    c.cancel(&long).await;
    wait_for_run(&logs.workers(), "cancelled", &long).await;
    let took = cancelled_at.elapsed();
    // A heartbeat is a third of the 3 s lease; with a feed it is at once.
    assert!(took < Duration::from_secs(3), "the cancel took {took:?}");
    eprintln!(
        "fleet on {}: a cancel reached the worker's handler in {took:?}",
        store.split(':').next().unwrap_or("")
    );
    drop((w1, w2, front));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_and_two_workers_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    fleet(&store).await;
}

/// A database of its own on the test PostgreSQL (the example server keeps
/// tasks in the default table), or `None` without one.
async fn postgres_database(test: &str) -> Option<String> {
    use sqlx::{Connection, Executor};
    let url = common::pg::url()?;
    let name = format!("fleet_{test}_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
    conn.execute(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .await
    .expect("drop database");
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create database");
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_and_two_workers_on_postgres() {
    let Some(store) = postgres_database("main").await else {
        return;
    };
    fleet(&store).await;
}

/// Under a key prefix of its own on the test Redis (`MCP_TASKS_REDIS_URL`),
/// or `None` without one.
fn redis_prefix(test: &str) -> Option<String> {
    let url = common::redis_db::url()?;
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!(
        "{url}{sep}prefix=fleet_{test}_{}",
        std::process::id()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_and_two_workers_on_redis() {
    let Some(store) = redis_prefix("main") else {
        return;
    };
    fleet(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_of_a_worker_hands_its_task_over_on_redis() {
    let Some(store) = redis_prefix("term") else {
        return;
    };
    sigterm(&store, "rerun").await;
    sigterm(&store, "fail").await;
}

/// A front, two workers, and a `slow_compute` task of `seconds` that one
/// of them runs: the front, a client, the runner, the other worker, the
/// task id and the index of the runner's log.
async fn one_task_running(
    fleet: &Fleet<'_>,
    logs: &Logs,
    seconds: f64,
    label: &str,
) -> (Process, Remote, Process, Process, String, usize) {
    let front = fleet.front(&logs.front);
    let mut c = Remote::new(front.url());
    let mut workers = [
        Some(fleet.worker(&logs.workers[0])),
        Some(fleet.worker(&logs.workers[1])),
    ];
    let id = c
        .start("slow_compute", json!({"seconds": seconds, "label": label}))
        .await;
    wait_for_run(&logs.workers(), "slow_compute", &id).await;
    let which = runner_of(&logs.workers(), "slow_compute", &id).expect("a runner");
    let runner = workers[which].take().expect("the runner");
    let other = workers[1 - which].take().expect("the other worker");
    (front, c, runner, other, id, which)
}

/// SIGTERM of the worker running a long task: with `rerun` the other
/// worker starts it at once (measured: long before the 30 s lease would
/// have let it); with `fail` it fails at once with the shutdown message.
/// SIGKILL: recovered by policy only after the lease, as before.
async fn sigterm(store: &str, recovery: &str) {
    let logs = Logs::new();
    let fleet = Fleet {
        store,
        recovery,
        lease: "30",
    };
    let (front, mut c, running, _other, id, which) =
        one_task_running(&fleet, &logs, 2.0, "long").await;
    let stopped_at = Instant::now();
    running.terminate();
    running.wait();
    match recovery {
        "rerun" => {
            let done = c.wait_for(&id, "completed").await;
            let took = stopped_at.elapsed();
            assert!(done["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("long"));
            let other = 1 - which;
            assert_eq!(
                runs(&[&logs.workers[other]], "slow_compute").get(&id),
                Some(&1)
            );
            // Drain 1 s + a 2 s run; the lease alone would have held 30 s.
            assert!(took < Duration::from_secs(10), "took {took:?}");
            eprintln!("SIGTERM with rerun: completed on the other worker {took:?} after the signal (lease 30 s)");
        }
        _ => {
            let failed = c.wait_for(&id, "failed").await;
            let took = stopped_at.elapsed();
            let message = failed["error"]["message"].as_str().unwrap();
            assert!(message.contains("shut down"), "{message}");
            assert!(took < Duration::from_secs(5), "took {took:?}");
            eprintln!("SIGTERM with fail: failed {took:?} after the signal");
        }
    }
    drop(front);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_of_a_worker_hands_its_task_over_on_postgres() {
    let Some(store) = postgres_database("term").await else {
        return;
    };
    sigterm(&store, "rerun").await;
    sigterm(&store, "fail").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_of_a_worker_hands_its_task_over_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    sigterm(&store, "rerun").await;
    sigterm(&store, "fail").await;
}

/// SIGKILL of the worker running a task: with `rerun`, another worker runs
/// it again once its lease (3 s) has run out, not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_worker_is_recovered_after_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let logs = Logs::new();
    let fleet = Fleet {
        store: &store,
        recovery: "rerun",
        lease: "3",
    };
    let (front, mut c, running, _other, id, _) =
        one_task_running(&fleet, &logs, 1.0, "killed").await;
    let killed_at = Instant::now();
    running.kill();
    c.wait_for(&id, "completed").await;
    let took = killed_at.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "re-run before the lease ran out: {took:?}"
    );
    eprintln!("SIGKILL with rerun: completed {took:?} after the kill (lease 3 s)");
    drop(front);
}
