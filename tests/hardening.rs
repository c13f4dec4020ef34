//! Hardening: input bounds, and a property test that drives the layer with
//! random operations and checks the task invariants after each one, on
//! every store the build has: `MemoryStore` in paused time, `SqliteStore`,
//! `PostgresStore` and `RedisStore` in real time and across restarts.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::{accept, err, ok, Client};
use mcp_task_layer::{Limits, TaskLayer, TaskStatus};
use proptest::prelude::*;
use serde_json::{json, Value};

fn limits() -> Limits {
    Limits {
        max_input_responses: 4,
        max_input_responses_bytes: 2_000,
        max_input_depth: 8,
        max_arguments_bytes: 1_000,
        max_result_bytes: 300,
        ..Limits::default()
    }
}

#[tokio::test(start_paused = true)]
async fn input_bounds_are_precise_32602_and_change_nothing() {
    let mut c = Client::new(common::layer().with_limits(limits()));
    let id = c.start("ask", json!({})).await;
    let before = c.wait_for(&id, TaskStatus::InputRequired).await;
    let mut deep = json!("x");
    for _ in 0..20 {
        deep = json!({ "d": deep });
    }
    let many: serde_json::Map<String, Value> =
        (0..5).map(|i| (format!("k{i}"), json!({}))).collect();
    let cases = [
        (Value::Object(many), "at most 4"),
        (
            json!({"name": {"action": "accept", "content": {"name": "x".repeat(3_000)}}}),
            "larger than 2000 bytes",
        ),
        (json!({"name": deep}), "deeper than 8"),
        (json!({"name": [1, 2]}), "must be an object"),
    ];
    for (answers, message) in cases {
        let r = c.update(&id, answers).await;
        let e = err(&r);
        assert_eq!(e.code, -32602);
        assert!(
            e.message.contains(message),
            "{} should say {message}",
            e.message
        );
        assert_eq!(
            c.get_ok(&id).await,
            before,
            "a refused update changes nothing"
        );
    }
    ok(&c.update(&id, json!({"name": accept("name", "Ada")})).await);
    c.wait_for(&id, TaskStatus::Completed).await;
}

#[tokio::test(start_paused = true)]
async fn oversized_arguments_are_refused_before_the_handler_runs() {
    let c = Client::new(common::layer().with_limits(limits()));
    let r = c.call("hang", json!({"blob": "x".repeat(2_000)})).await;
    assert_eq!(err(&r).code, -32602);
    assert!(err(&r).message.contains("larger than 1000 bytes"));
    assert_eq!(c.seen.calls("hang"), 0);
    // Synchronous tools are not stored, so they are not bounded here.
    let r = c.call("echo", json!({"text": "y".repeat(2_000)})).await;
    assert_eq!(ok(&r)["resultType"], "complete");
}

#[tokio::test(start_paused = true)]
async fn an_oversized_result_fails_the_task() {
    let mut c = Client::new(common::layer().with_limits(limits()));
    let id = c
        .start("slow", json!({"ms": 200, "pad": "z".repeat(10)}))
        .await;
    let body = c.wait_for(&id, TaskStatus::Completed).await;
    assert!(body["result"].is_object(), "a small result is stored");
    let mut c = Client::new(common::layer().with_limits(Limits {
        max_result_bytes: 10,
        ..limits()
    }));
    let id = c.start("slow", json!({"ms": 200})).await;
    let body = c.wait_for(&id, TaskStatus::Failed).await;
    assert_eq!(body["error"]["code"], -32603);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("larger than 10 bytes"));
}

#[tokio::test(start_paused = true)]
async fn unfinished_tasks_per_owner_are_bounded() {
    let mut c = Client::new(common::layer().with_limits(Limits {
        max_tasks_per_owner: 2,
        ..limits()
    }));
    c.owner = Some("alice".into());
    let bob = c.as_owner("bob");
    let first = c.start("hang", json!({})).await;
    c.start("ask", json!({})).await;
    let r = c.call("hang", json!({})).await;
    assert_eq!(err(&r).code, -32602);
    assert!(err(&r).message.contains("at most 2"), "{}", err(&r).message);
    assert_eq!(c.seen.calls("hang"), 1, "the refused call never ran");
    // Another owner is not affected; a finished task frees a slot.
    bob.start("hang", json!({})).await;
    ok(&c.cancel(&first).await);
    c.wait_for(&first, TaskStatus::Cancelled).await;
    c.start("hang", json!({})).await;
}

// ----- the property test -----
//
// One reference model, every backend of the build. `MemoryStore` runs in
// paused tokio time. The SQL stores run in real time, for two reasons: a
// paused clock auto-advances whenever the runtime waits on their I/O, which
// fires leases, heartbeats and TTLs at random; and the layer's clock starts
// from the wall clock when a layer is built, so a process restarted in
// paused time would see time jump back by all the virtual time the last
// one skipped. Their model times are scaled down, with a 600 ms lease and
// a 50 ms reaper, and they have one more operation, `Restart`.

#[derive(Clone, Debug)]
enum Op {
    /// Start a task of one of the asking / finishing tools.
    Start(usize),
    /// Poll a task (by index among started ones).
    Get(usize),
    /// Answer a task: with its outstanding keys, a stale or unknown key, or
    /// as another owner.
    Update(usize, AnswerKind),
    Cancel(usize, bool),
    /// Let time pass: one of the backend's four [`Timing::advance_ms`].
    Advance(usize),
    /// Durable stores only: the process dies (its store connections are
    /// closed, then its runtime is dropped with every runner and handler in
    /// it) and a new process opens the same database.
    Restart,
}

#[derive(Clone, Copy, Debug)]
enum AnswerKind {
    Outstanding,
    OnlyFirst,
    Stale,
    Unknown,
    Foreign,
}

const TOOLS: [&str; 7] = ["ask", "ask2", "reask", "hang", "slow", "tool_error", "boom"];

fn op(durable: bool) -> BoxedStrategy<Op> {
    let kind = prop_oneof![
        Just(AnswerKind::Outstanding),
        Just(AnswerKind::OnlyFirst),
        Just(AnswerKind::Stale),
        Just(AnswerKind::Unknown),
        Just(AnswerKind::Foreign),
    ];
    let ops = prop_oneof![
        (0..TOOLS.len()).prop_map(Op::Start),
        (0..8usize).prop_map(Op::Get),
        ((0..8usize), kind).prop_map(|(i, k)| Op::Update(i, k)),
        ((0..8usize), any::<bool>()).prop_map(|(i, f)| Op::Cancel(i, f)),
        (0..4usize).prop_map(Op::Advance),
    ];
    if durable {
        prop_oneof![8 => ops, 1 => Just(Op::Restart)].boxed()
    } else {
        ops.boxed()
    }
}

fn ops(durable: bool, max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(durable), 1..max_len)
}

/// How long things take in a case.
#[derive(Clone, Copy, Debug)]
struct Timing {
    /// `slow`'s work (its policy answers synchronously within 100 ms, so
    /// this must be well above that to become a task).
    slow_ms: u64,
    /// What `Advance(i)` waits.
    advance_ms: [u64; 4],
}

const PAUSED: Timing = Timing {
    slow_ms: 700,
    advance_ms: [1, 50, 600, 5_000],
};

/// What the test has seen of one task.
#[derive(Default, Debug)]
struct Seen {
    tool: &'static str,
    terminal: Option<Value>,
    answered: BTreeSet<String>,
    payloads: BTreeMap<String, Value>,
    last_updated: String,
    created: String,
    rounds_answered: usize,
    /// The last `tasks/get` body.
    last: Option<Value>,
    /// Its owner's `tasks/cancel` was accepted.
    cancel_sent: bool,
    /// For a task that was `working` when its process died: when its
    /// runner's lease ran out (Unix ms).
    orphan_until: Option<i64>,
}

/// `ms` as the layer writes timestamps (RFC 3339, milliseconds, UTC): a
/// later time is a greater string.
fn stamp(ms: i64) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap()
        .format(format)
        .unwrap()
}

/// Whether a finished task ended as its tool's handler answers.
fn ends_as_its_handler_answered(tool: &str, body: &Value) -> bool {
    match (tool, body["status"].as_str()) {
        ("boom", Some("failed")) => body["error"]["code"] == -32050,
        ("tool_error", Some("completed")) => body["result"]["isError"] == true,
        ("ask" | "ask2" | "reask" | "slow", Some("completed")) => {
            body["result"]["isError"] == false
        }
        _ => false,
    }
}

async fn observe(c: &Client, id: &str, s: &mut Seen) {
    let r = c.get(id).await;
    let Some(body) = r.result_value() else {
        // Only expiry may make a task unknown to its owner; TTL is an hour.
        panic!("own task {id} became unknown: {:?}", r.error_value());
    };
    let status = body["status"].as_str().unwrap();
    if let Some(t) = &s.terminal {
        assert_eq!(body, t, "a terminal task never changes");
    }
    if matches!(status, "completed" | "failed" | "cancelled") {
        s.terminal = Some(body.clone());
    }
    let updated = body["lastUpdatedAt"].as_str().unwrap().to_owned();
    assert!(
        updated >= s.last_updated,
        "lastUpdatedAt never goes backwards"
    );
    assert!(updated >= s.created);
    if s.created.is_empty() {
        s.created = body["createdAt"].as_str().unwrap().to_owned();
    }
    assert_eq!(
        body["createdAt"],
        s.created.as_str(),
        "createdAt is constant"
    );
    if let Some(reqs) = body.get("inputRequests").and_then(Value::as_object) {
        assert!(!reqs.is_empty());
        for (k, v) in reqs {
            assert!(
                !s.answered.contains(k),
                "an answered key never reappears: {k}"
            );
            if let Some(p) = s.payloads.get(k) {
                assert_eq!(p, v, "one key always names the same request");
            }
            s.payloads.insert(k.clone(), v.clone());
        }
    }
    // How it may end: as its handler answered, cancelled by its owner, or
    // (only if its process died while it was working) failed by the
    // recovery once the dead runner's lease ran out.
    if status == "cancelled" {
        assert!(
            s.cancel_sent,
            "only its owner's cancel cancels a task: {body}"
        );
    }
    let recovered = status == "failed"
        && body["error"]["code"] == -32603
        && body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("restarted"));
    match s.orphan_until {
        Some(until) => {
            assert!(
                matches!(status, "working" | "cancelled") || recovered,
                "a task whose process died while it was working stays working until the \
                 recovery fails it (Recovery::Fail never runs it again): {body}"
            );
            if recovered {
                let lease_end = stamp(until);
                assert!(
                    updated > lease_end,
                    "recovered only after the dead runner's lease ran out at {lease_end}: {body}"
                );
            }
        }
        None => {
            if matches!(status, "completed" | "failed") {
                assert!(
                    ends_as_its_handler_answered(s.tool, body),
                    "{} ends as its handler answered: {body}",
                    s.tool
                );
            }
        }
    }
    s.last_updated = updated;
    s.last = Some(body.clone());
}

fn answer_for(key: &str) -> Value {
    json!({"action": "accept", "content": {"name": "n", "v": key}})
}

/// A client of the layer as owner `me`, and one as `other`.
fn clients(layer: TaskLayer) -> (Client, Client) {
    let mut c = Client::new(layer);
    c.owner = Some("me".into());
    let other = c.as_owner("other");
    (c, other)
}

/// The reference model: what every task has shown so far, across all the
/// processes of one case.
struct Model {
    timing: Timing,
    tasks: Vec<(String, Seen)>,
    /// The scripted server of each process (handler runs add up).
    servers: Vec<Arc<common::Seen>>,
}

impl Model {
    fn new(timing: Timing) -> Self {
        Model {
            timing,
            tasks: Vec::new(),
            servers: Vec::new(),
        }
    }

    async fn apply(&mut self, c: &Client, other: &Client, op: &Op) {
        match *op {
            Op::Start(t) => {
                let id = c.start(TOOLS[t], json!({"ms": self.timing.slow_ms})).await;
                let seen = Seen {
                    tool: TOOLS[t],
                    ..Seen::default()
                };
                self.tasks.push((id, seen));
            }
            Op::Get(i) if !self.tasks.is_empty() => {
                let n = self.tasks.len();
                let (id, s) = &mut self.tasks[i % n];
                observe(c, id, s).await;
            }
            Op::Update(i, kind) if !self.tasks.is_empty() => {
                let n = self.tasks.len();
                let (id, s) = &mut self.tasks[i % n];
                let body = c.get_ok(id).await;
                let outstanding: Vec<String> = body
                    .get("inputRequests")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                let keys: Vec<String> = match kind {
                    AnswerKind::Outstanding => outstanding.clone(),
                    AnswerKind::OnlyFirst => outstanding.iter().take(1).cloned().collect(),
                    AnswerKind::Stale => s.answered.iter().cloned().collect(),
                    AnswerKind::Unknown => vec!["never-issued".into()],
                    AnswerKind::Foreign => outstanding.clone(),
                };
                let answers: serde_json::Map<String, Value> =
                    keys.iter().map(|k| (k.clone(), answer_for(k))).collect();
                if matches!(kind, AnswerKind::Foreign) {
                    let r = other.update(id, Value::Object(answers)).await;
                    assert_eq!(err(&r).code, -32602, "another owner's task is unknown");
                    return;
                }
                let r = c.update(id, Value::Object(answers)).await;
                assert_eq!(ok(&r), &json!({"resultType": "complete"}));
                let accepted: Vec<_> = keys
                    .iter()
                    .filter(|k| outstanding.contains(k))
                    .cloned()
                    .collect();
                if !accepted.is_empty() && accepted.len() == outstanding.len() {
                    s.rounds_answered += 1;
                }
                s.answered.extend(accepted);
                observe(c, id, s).await;
            }
            Op::Cancel(i, foreign) if !self.tasks.is_empty() => {
                let n = self.tasks.len();
                let (id, s) = &mut self.tasks[i % n];
                if foreign {
                    assert_eq!(err(&other.cancel(id).await).code, -32602);
                } else {
                    ok(&c.cancel(id).await);
                    s.cancel_sent = true;
                    // Cancelled, unless another terminal state came first.
                    let body = c.get_ok(id).await;
                    let status = body["status"].as_str().unwrap();
                    assert!(
                        matches!(status, "cancelled" | "completed" | "failed"),
                        "{status}"
                    );
                }
                observe(c, id, s).await;
            }
            Op::Advance(i) => {
                tokio::time::sleep(Duration::from_millis(self.timing.advance_ms[i])).await;
            }
            Op::Restart => unreachable!("a restart ends one process's part of the case"),
            _ => {}
        }
    }

    /// Final accounting: the handler ran once per answered round plus the
    /// first run (answered rounds that a cancel overtook may not resume),
    /// in whichever process that was.
    async fn finish(&mut self, c: &Client) {
        let mut per_tool: HashMap<&str, (usize, usize)> = HashMap::new();
        for (id, s) in &mut self.tasks {
            observe(c, id, s).await;
            let e = per_tool.entry(s.tool).or_default();
            e.0 += 1 + s.rounds_answered;
            e.1 += 1;
        }
        for (tool, (max_runs, starts)) in per_tool {
            let calls: usize = self.servers.iter().map(|seen| seen.calls(tool)).sum();
            assert!(calls >= starts, "{tool}: every task ran its handler");
            assert!(
                calls <= max_runs,
                "{tool}: {calls} runs > {max_runs}: one resume per answered round"
            );
        }
    }
}

async fn run_in_memory(ops: Vec<Op>) {
    let mut model = Model::new(PAUSED);
    let (c, other) = clients(common::layer());
    model.servers.push(Arc::clone(&c.seen));
    for op in &ops {
        model.apply(&c, &other, op).await;
    }
    model.finish(&c).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_random_operations(ops in ops(false, 40)) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(run_in_memory(ops));
    }
}

/// The durable stores: the same model with restarts, in real time.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod durable {
    use super::*;

    use mcp_task_layer::TaskStore;
    use proptest::test_runner::{Config, TestRunner};
    use tower::Layer;

    /// Cases per durable store, each of 1-23 operations (about one in nine a
    /// restart).
    const CASES: u32 = 24;
    /// Renewed every 200 ms: a live runner loses its task to the recovery
    /// only if its thread stalls for 400 ms.
    const LEASE: Duration = Duration::from_millis(600);
    const REAP: Duration = Duration::from_millis(50);
    const REAL: Timing = Timing {
        slow_ms: 400,
        advance_ms: [1, 20, 80, 250],
    };

    /// A database that outlives the processes of one case.
    pub(super) enum Db {
        #[cfg(feature = "sqlite")]
        Sqlite(String),
        #[cfg(feature = "postgres")]
        Postgres { url: String, table: String },
        #[cfg(feature = "redis")]
        Redis { url: String, prefix: String },
    }

    /// One process's connection to it.
    enum Conn {
        #[cfg(feature = "sqlite")]
        Sqlite(mcp_task_layer::store::SqliteStore),
        #[cfg(feature = "postgres")]
        Postgres(mcp_task_layer::store::PostgresStore),
        #[cfg(feature = "redis")]
        Redis(mcp_task_layer::store::RedisStore),
    }

    impl Db {
        async fn open(&self) -> (TaskLayer, Conn) {
            match self {
                #[cfg(feature = "sqlite")]
                Db::Sqlite(url) => {
                    let store = mcp_task_layer::store::SqliteStore::connect(url)
                        .await
                        .unwrap();
                    (common::layer_on(store.clone()), Conn::Sqlite(store))
                }
                #[cfg(feature = "postgres")]
                Db::Postgres { url, table } => {
                    // As `pg::Tables::store`, which names and drops the table.
                    let options = mcp_task_layer::store::SqlOptions::new()
                        .with_table(table)
                        .unwrap()
                        .with_max_connections(4);
                    let store = mcp_task_layer::store::PostgresStore::connect_with(url, options)
                        .await
                        .unwrap();
                    (common::layer_on(store.clone()), Conn::Postgres(store))
                }
                #[cfg(feature = "redis")]
                Db::Redis { url, prefix } => {
                    // As `redis_db::Prefixes::store`, which names and deletes the keys.
                    let options = mcp_task_layer::store::RedisOptions::new()
                        .with_prefix(prefix)
                        .unwrap();
                    let store = mcp_task_layer::store::RedisStore::connect_with(url, options)
                        .await
                        .unwrap();
                    (common::layer_on(store.clone()), Conn::Redis(store))
                }
            }
        }
    }

    impl Conn {
        /// Close every connection, waiting for statements in flight: nothing
        /// this process still runs reaches the database after this.
        async fn close(&self) {
            match self {
                #[cfg(feature = "sqlite")]
                Conn::Sqlite(s) => s.close().await,
                #[cfg(feature = "postgres")]
                Conn::Postgres(s) => s.close().await,
                #[cfg(feature = "redis")]
                Conn::Redis(s) => s.close().await,
            }
        }
    }

    fn wall_ms() -> i64 {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        i64::try_from(since.as_millis()).unwrap()
    }

    impl Model {
        /// The database as the dead process left it, read before the new
        /// process starts its background work: a task can only be
        /// `working` there if it was last seen `working` (or never seen);
        /// those are orphans, and keep the end of their dead runner's lease.
        async fn note_restart(&mut self, store: &dyn TaskStore) {
            let now = wall_ms();
            for (id, s) in &mut self.tasks {
                let record = store
                    .get(id, now)
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("task {id} survives a restart"));
                if record.status != TaskStatus::Working {
                    continue;
                }
                let last = s.last.as_ref().and_then(|b| b["status"].as_str());
                assert!(
                    matches!(last, None | Some("working")),
                    "task {id}, last seen {last:?}, is working after a restart"
                );
                if s.orphan_until.is_none() {
                    let lease = record.lease.as_ref().expect("a working task has a lease");
                    s.orphan_until = Some(lease.until_ms);
                }
            }
        }

        /// Read every task through the new process: one that waited for
        /// input or had finished reads back exactly as before.
        async fn reread(&mut self, c: &Client) {
            for (id, s) in &mut self.tasks {
                let before = s.last.clone();
                observe(c, id, s).await;
                if let Some(before) = before.filter(|b| b["status"] != "working") {
                    assert_eq!(
                        s.last.as_ref(),
                        Some(&before),
                        "a task waiting for input or finished is unchanged by a restart"
                    );
                }
            }
        }

        /// Every orphan ends: the recovery fails it once the dead runner's
        /// lease has run out (observed through the layer's events, for at
        /// most 5 s, about eight leases).
        async fn settle_orphans(&mut self, c: &mut Client) {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            for (id, s) in &mut self.tasks {
                let Some(until) = s.orphan_until else {
                    continue;
                };
                loop {
                    observe(c, id, s).await;
                    if s.terminal.is_some() {
                        break;
                    }
                    match tokio::time::timeout_at(deadline, c.events.recv()).await {
                        Ok(Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
                        Ok(Err(e)) => panic!("event channel closed: {e}"),
                        Err(_) => panic!(
                            "task {id} still works 5 s after its process died (lease until {})",
                            stamp(until)
                        ),
                    }
                }
            }
        }
    }

    /// One case: each stretch of operations between restarts is one
    /// process, on a runtime of its own.
    fn run(db: &Db, ops: &[Op]) {
        let mut model = Model::new(REAL);
        let lives: Vec<&[Op]> = ops.split(|op| matches!(op, Op::Restart)).collect();
        for (n, life) in lives.iter().enumerate() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let (layer, conn) = db.open().await;
                let layer = layer.with_lease_ttl(LEASE).with_reap_interval(REAP);
                if n > 0 {
                    model.note_restart(layer.store().as_ref()).await;
                }
                // As a server does at start-up: reaper and orphan recovery.
                layer
                    .layer(common::server(Arc::default()))
                    .start_background_work();
                let (mut c, other) = clients(layer);
                model.servers.push(Arc::clone(&c.seen));
                if n > 0 {
                    model.reread(&c).await;
                }
                for op in *life {
                    model.apply(&c, &other, op).await;
                }
                if n + 1 == lives.len() {
                    model.settle_orphans(&mut c).await;
                    model.finish(&c).await;
                } else {
                    // What the next process must read back unchanged.
                    for (id, s) in &mut model.tasks {
                        observe(&c, id, s).await;
                    }
                }
                // The process dies here.
                conn.close().await;
            });
            drop(runtime);
        }
    }

    /// Run [`CASES`] random cases, each on the database `db` makes for it.
    pub(super) fn check(db: impl Fn() -> (Db, Box<dyn std::any::Any>)) {
        let mut runner = TestRunner::new(Config {
            cases: CASES,
            max_shrink_iters: 64,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&ops(true, 24), |ops| {
            let (db, _keep) = db();
            run(&db, &ops);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn invariants_hold_on_sqlite_across_restarts() {
    durable::check(|| {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
        (durable::Db::Sqlite(url), Box::new(dir))
    });
}

#[cfg(feature = "postgres")]
#[test]
fn invariants_hold_on_postgres_across_restarts() {
    let Some(url) = common::pg::url() else {
        return;
    };
    let tables = common::pg::Tables::new(&url, "hardening");
    durable::check(|| {
        let db = durable::Db::Postgres {
            url: url.clone(),
            table: tables.next(),
        };
        (db, Box::new(()))
    });
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(tables.drop_all());
}

#[cfg(feature = "redis")]
#[test]
fn invariants_hold_on_redis_across_restarts() {
    let Some(url) = common::redis_db::url() else {
        return;
    };
    let prefixes = common::redis_db::Prefixes::new(&url, "hardening");
    durable::check(|| {
        let db = durable::Db::Redis {
            url: url.clone(),
            prefix: prefixes.next(),
        };
        (db, Box::new(()))
    });
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(prefixes.drop_all());
}
