//! Hardening: input bounds, and a property test that drives the layer with
//! random operations and checks the task invariants after each one, on
//! every store the build has: `MemoryStore` in paused time, `SqliteStore`,
//! `PostgresStore` and `RedisStore` in real time and across restarts.

#[path = "../common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::{accept, err, ok, Client};
use mcp_task_layer::{Limits, TaskLayer, TaskStatus};
use proptest::prelude::*;
use serde_json::{json, Value};

mod bounds;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod durable;

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
