//! Hardening: input bounds, and a property test that drives the layer with
//! random operations and checks the task invariants after each one.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use common::{accept, err, ok, Client};
use mcp_task_layer::{Limits, TaskStatus};
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
    /// Let time pass (ms).
    Advance(u64),
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

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(AnswerKind::Outstanding),
        Just(AnswerKind::OnlyFirst),
        Just(AnswerKind::Stale),
        Just(AnswerKind::Unknown),
        Just(AnswerKind::Foreign),
    ];
    prop_oneof![
        (0..TOOLS.len()).prop_map(Op::Start),
        (0..8usize).prop_map(Op::Get),
        ((0..8usize), kind).prop_map(|(i, k)| Op::Update(i, k)),
        ((0..8usize), any::<bool>()).prop_map(|(i, f)| Op::Cancel(i, f)),
        prop_oneof![Just(1u64), Just(50), Just(600), Just(5_000)].prop_map(Op::Advance),
    ]
}

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
}

async fn observe(c: &Client, id: &str, s: &mut Seen) {
    let r = c.get(id).await;
    let Ok(body) = &r.payload else {
        // Only expiry may make a task unknown to its owner; TTL is an hour.
        panic!("own task {id} became unknown: {:?}", r.payload);
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
    s.last_updated = updated;
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
}

fn answer_for(key: &str) -> Value {
    json!({"action": "accept", "content": {"name": "n", "v": key}})
}

async fn run_ops(ops: Vec<Op>) {
    let mut c = Client::new(common::layer());
    c.owner = Some("me".into());
    let mut other = c.as_owner("other");
    other.owner = Some("other".into());
    let mut tasks: Vec<(String, Seen)> = Vec::new();
    for op in ops {
        match op {
            Op::Start(t) => {
                let id = c.start(TOOLS[t], json!({"ms": 700})).await;
                let seen = Seen {
                    tool: TOOLS[t],
                    ..Seen::default()
                };
                tasks.push((id, seen));
            }
            Op::Get(i) if !tasks.is_empty() => {
                let n = tasks.len();
                let (id, s) = &mut tasks[i % n];
                observe(&c, id, s).await;
            }
            Op::Update(i, kind) if !tasks.is_empty() => {
                let n = tasks.len();
                let (id, s) = &mut tasks[i % n];
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
                let who = if matches!(kind, AnswerKind::Foreign) {
                    &other
                } else {
                    &c
                };
                let r = who.update(id, Value::Object(answers)).await;
                if matches!(kind, AnswerKind::Foreign) {
                    assert_eq!(err(&r).code, -32602, "another owner's task is unknown");
                    continue;
                }
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
                observe(&c, id, s).await;
            }
            Op::Cancel(i, foreign) if !tasks.is_empty() => {
                let n = tasks.len();
                let (id, s) = &mut tasks[i % n];
                if foreign {
                    assert_eq!(err(&other.cancel(id).await).code, -32602);
                } else {
                    ok(&c.cancel(id).await);
                    // Cancelled, unless another terminal state came first.
                    let body = c.get_ok(id).await;
                    let status = body["status"].as_str().unwrap();
                    assert!(
                        matches!(status, "cancelled" | "completed" | "failed"),
                        "{status}"
                    );
                }
                observe(&c, id, s).await;
            }
            Op::Advance(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            _ => {}
        }
    }
    // Final accounting: the handler ran once per answered round plus the
    // first run (answered rounds that a cancel overtook may not resume).
    let mut per_tool: HashMap<&str, (usize, usize)> = HashMap::new();
    for (id, s) in &mut tasks {
        observe(&c, id, s).await;
        let e = per_tool.entry(s.tool).or_default();
        e.0 += 1 + s.rounds_answered;
        e.1 += 1;
    }
    for (tool, (max_runs, starts)) in per_tool {
        let calls = c.seen.calls(tool);
        assert!(calls >= starts, "{tool}: every task ran its handler");
        assert!(
            calls <= max_runs,
            "{tool}: {calls} runs > {max_runs}: one resume per answered round"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_random_operations(ops in proptest::collection::vec(op(), 1..40)) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(run_ops(ops));
    }
}
