//! The history checked once the run is over: what was acked against what
//! was read afterwards, and the runs the workers logged.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::driver::{Kind, Op, Plan};
use crate::fleet::Fault;

/// What the history shows.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) runs: usize,
    pub(crate) tasks: usize,
    pub(crate) unacked: usize,
    pub(crate) sync: usize,
    pub(crate) completed: usize,
    /// Failed: none may, every process re-runs what a fault stopped.
    pub(crate) failed: usize,
    pub(crate) cancelled: usize,
    /// Acked and never read terminal, read as unknown, or an acked answer
    /// asked for again.
    pub(crate) lost: usize,
    /// More runs than its rounds and the faults in its life explain.
    pub(crate) duplicated: usize,
    /// A read after the first terminal one that disagrees, a result that
    /// is not its own call's, a read after an acked cancel still running.
    pub(crate) stale: usize,
    /// Cancelled while its handler ran, with no fault near, and the
    /// handler not stopped by its cancellation within [`STOP_BOUND`].
    pub(crate) unstopped: usize,
    /// Cancelled tasks whose stop was timed (no fault near their cancel).
    pub(crate) stops_timed: usize,
    pub(crate) notes: Vec<String>,
}

impl Verdict {
    pub(crate) fn ok(&self) -> bool {
        // With `--recovery rerun` on every process none of the workload's
        // tools can fail: a failed task is a run lost to a fault.
        self.lost == 0
            && self.duplicated == 0
            && self.stale == 0
            && self.unstopped == 0
            && self.failed == 0
    }
}

/// What the run logs say: handler runs per task id (`TOOL TASK_ID MS`
/// lines), the last run start of each task with the member that ran it
/// (logs are the workers', member `i + 1` for log `i`), and when each
/// handler stopped by its cancellation stopped (`cancelled TASK_ID MS`,
/// Unix milliseconds; the last stop of a task).
struct Runs {
    counts: HashMap<String, usize>,
    last_start: HashMap<String, (usize, u128)>,
    stopped: HashMap<String, u128>,
}

fn runs(logs: &[PathBuf]) -> Runs {
    let mut out = Runs {
        counts: HashMap::new(),
        last_start: HashMap::new(),
        stopped: HashMap::new(),
    };
    for (i, path) in logs.iter().enumerate() {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let mut fields = line.split(' ');
            let (Some(what), Some(id)) = (fields.next(), fields.next()) else {
                continue;
            };
            let ms: u128 = fields.next().and_then(|m| m.parse().ok()).unwrap_or(0);
            if what == "cancelled" {
                let at = out.stopped.entry(id.to_owned()).or_insert(ms);
                *at = (*at).max(ms);
            } else {
                *out.counts.entry(id.to_owned()).or_default() += 1;
                let last = out.last_start.entry(id.to_owned()).or_insert((i + 1, ms));
                if ms >= last.1 {
                    *last = (i + 1, ms);
                }
            }
        }
    }
    out
}

/// `at` (this process's monotonic clock) as Unix milliseconds, as the run
/// logs' wall clock has it.
fn unix_ms(at: Instant) -> u128 {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    now_ms.saturating_sub(Instant::now().saturating_duration_since(at).as_millis())
}

/// How long after its cancel is acked a calm task's handler may still run:
/// a worker elsewhere hears the cancel from the change feed, at the latest
/// at its next lease renewal (a third of the lease), plus a second of
/// slack for the handler to return and the log line to be written.
const STOP_BOUND: Duration = Duration::from_secs(crate::fleet::LEASE_SECS + 1);

/// What a terminal read says: its status and its result or error.
fn outcome(task: &Value) -> (String, Value) {
    let status = task["status"].as_str().unwrap_or("").to_owned();
    let what = if task["result"].is_null() {
        task["error"].clone()
    } else {
        task["result"]["content"][0]["text"].clone()
    };
    (status, what)
}

fn terminal(task: &Value) -> bool {
    matches!(
        task["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

pub(crate) fn check(plans: &[Plan], history: &[Op], logs: &[PathBuf], faults: &[Fault]) -> Verdict {
    let Runs {
        counts: runs,
        last_start,
        stopped,
    } = runs(logs);
    let mut v = Verdict {
        runs: runs.values().sum(),
        tasks: plans.len(),
        ..Verdict::default()
    };
    let mut by_task: Vec<Vec<&Op>> = vec![Vec::new(); plans.len()];
    for op in history {
        by_task[op.task].push(op);
    }
    for (n, ops) in by_task.iter_mut().enumerate() {
        ops.sort_by_key(|op| op.start);
        let plan = &plans[n];
        let create = ops.iter().find(|op| {
            op.method == "tools/call" && op.answer.as_ref().is_ok_and(|r| r["resultType"] == "task")
        });
        let Some(create) = create else {
            if ops
                .iter()
                .any(|op| op.method == "tools/call" && op.answer.is_ok())
            {
                v.sync += 1;
            } else {
                v.unacked += 1;
            }
            continue;
        };
        let id = create.answer.as_ref().unwrap()["taskId"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let note = |v: &mut Verdict, what: String| {
            v.notes
                .push(format!("task {n} ({:?}, {id}): {what}", plan.kind));
        };
        let reads: Vec<(&Op, &Value)> = ops
            .iter()
            .filter(|op| op.method == "tasks/get" && op.start > create.end)
            .filter_map(|op| op.answer.as_ref().ok().map(|r| (*op, r)))
            .collect();
        if ops.iter().any(|op| {
            op.method == "tasks/get"
                && op
                    .answer
                    .as_ref()
                    .is_err_and(|e| e.starts_with("rpc -32602"))
        }) {
            v.lost += 1;
            note(
                &mut v,
                "read as unknown after its creation was acked".into(),
            );
            continue;
        }
        // Terminal once, then the same at every later read.
        let Some((first_end, first)) = reads.iter().find(|(_, r)| terminal(r)) else {
            v.lost += 1;
            note(&mut v, "never read terminal".into());
            continue;
        };
        let first_outcome = outcome(first);
        if reads
            .iter()
            .any(|(op, r)| op.start > first_end.end && outcome(r) != first_outcome)
        {
            v.stale += 1;
            note(
                &mut v,
                format!("changed after it was read as {first_outcome:?}"),
            );
        }
        match first_outcome.0.as_str() {
            "completed" => {
                v.completed += 1;
                if first_outcome.1 != Value::String(plan.expected()) {
                    v.stale += 1;
                    note(
                        &mut v,
                        format!("completed with {:?}, not its own result", first_outcome.1),
                    );
                }
            }
            "failed" => {
                v.failed += 1;
                note(&mut v, format!("failed: {}", first_outcome.1));
            }
            _ => v.cancelled += 1,
        }
        // An acked answer is never asked for again.
        let first_ack = |method: &str| {
            ops.iter()
                .filter(|op| op.method == method && op.answer.is_ok())
                .map(|op| op.end)
                .min()
        };
        if let Some(at) = first_ack("tasks/update") {
            if reads
                .iter()
                .any(|(op, r)| op.start > at && r["status"] == "input_required")
            {
                v.lost += 1;
                note(&mut v, "asked again after its answer was acked".into());
            }
        }
        // An acked cancel leaves the task terminal for every later read.
        if let Some(at) = first_ack("tasks/cancel") {
            if reads.iter().any(|(op, r)| op.start > at && !terminal(r)) {
                v.stale += 1;
                note(&mut v, "read running after its cancel was acked".into());
            }
            // Its handler, if one ran when the cancel was acked, stopped by
            // the cancellation within the bound: timed when no fault that
            // could touch that run (its worker killed, frozen or cut off,
            // the database down) came between the run's start and the
            // bound.
            let ack_ms = unix_ms(at);
            let due = unix_ms(at + STOP_BOUND);
            let calm = last_start.get(&id).is_some_and(|&(member, start)| {
                start <= ack_ms
                    && !faults.iter().any(|f| {
                        f.touches(member) && unix_ms(f.ended) > start && unix_ms(f.began) < due
                    })
            });
            let ran = runs.get(&id).copied().unwrap_or(0);
            if first_outcome.0 == "cancelled" && ran > 0 && calm {
                v.stops_timed += 1;
                match stopped.get(&id) {
                    None => {
                        v.unstopped += 1;
                        note(&mut v, "its handler never stopped after the cancel".into());
                    }
                    Some(&ms) if ms > due => {
                        v.unstopped += 1;
                        let late = ms - ack_ms;
                        note(
                            &mut v,
                            format!("its handler stopped {late} ms after the cancel was acked"),
                        );
                    }
                    Some(_) => {}
                }
            }
        }
        // Runs: the first, one per round of answers, and one per fault
        // that could have stopped a run in the task's life.
        let last = ops.last().map_or(create.end, |op| op.end);
        let rounds = match plan.kind {
            Kind::Ask | Kind::Multi => 1,
            _ => 0,
        };
        let hits = faults
            .iter()
            .filter(|f| f.ended > create.start && f.began < last)
            .count();
        let ran = runs.get(&id).copied().unwrap_or(0);
        if ran > 1 + rounds + hits {
            v.duplicated += 1;
            note(
                &mut v,
                format!("{ran} runs for {rounds} rounds and {hits} faults"),
            );
        }
    }
    v
}
