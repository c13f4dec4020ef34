//! The model's actions: each actor's read-and-decide and its conditional
//! write, deciding through the real [`transition`] functions and guards.

use std::collections::BTreeMap;

use serde_json::{json, Map};
use stateright::{Model, Property};

use super::{
    Action, Caller, Cancel, Claim, Ghost, Protocol, Rec, Run, RunOp, RunWrite, State, CANCEL,
    FENCED, FIRST_WORKER, NO_DROP, ONE_RUN, REAPER, REPLICAS, TERMINAL,
};
use crate::json::JsonText;
use crate::protocol::{InputRequest, TaskStatus};
use crate::runtime::answer::HandlerAnswer;
use crate::runtime::transition;
use crate::store::TaskRecord;

/// Why a conditional write did not land (`store::Error`'s two cases).
enum Lost {
    Conflict,
    NotFound,
}

/// What the handler answers: a result once it saw both answers, else a
/// round of input requests for `a` and `b`; or `requestState` alone.
fn handler_answer(answered: bool, state_only: bool) -> HandlerAnswer {
    if state_only {
        return HandlerAnswer::StateOnly("s".into());
    }
    if answered {
        return HandlerAnswer::Result(JsonText::from_value(&json!({"content": []})), false);
    }
    let ask = || InputRequest::new("elicitation/create", Map::new());
    HandlerAnswer::Input {
        requests: BTreeMap::from([("a".into(), ask()), ("b".into(), ask())]),
        state: None,
    }
}

/// Whether a handler invoked on `record` sees both answers.
fn sees_answers(record: &TaskRecord) -> bool {
    ["a", "b"]
        .iter()
        .all(|k| record.input_responses.contains_key(*k))
}

impl State {
    /// `store.replace(next, expect)`: the conditional write, and what the
    /// properties check of every write that lands.
    fn replace(&mut self, next: &Rec, expect: u64) -> Result<(), Lost> {
        let Some(prev) = &self.store else {
            return Err(Lost::NotFound);
        };
        if prev.0.version != expect {
            return Err(Lost::Conflict);
        }
        if prev.0.status.is_terminal() {
            let how = format!(
                "{:?} v{} -> {:?}",
                prev.0.status, prev.0.version, next.0.status
            );
            self.violate(TERMINAL, how);
        }
        if let Some(l) = &next.0.lease {
            self.ghost.max_fence = self.ghost.max_fence.max(l.fence);
        }
        self.store = Some(next.clone());
        Ok(())
    }

    /// A run starts on `replica` from `record`, just written.
    fn start_run(&mut self, replica: u8, record: &TaskRecord) {
        let fence = record.lease.as_ref().map_or(0, |l| l.fence);
        if let Some((f, round)) = self.ghost.last_start {
            if fence <= f || record.round <= round {
                let how = format!(
                    "run (fence {fence}, round {}) after (fence {f}, round {round})",
                    record.round
                );
                self.violate(ONE_RUN, how);
            }
        }
        if self.ghost.cancel_acked {
            self.violate(CANCEL, format!("run under fence {fence} started"));
        }
        for (key, value) in std::mem::take(&mut self.ghost.pending) {
            if record.input_responses.get(key) != Some(&json!(value)) {
                self.violate(
                    NO_DROP,
                    format!("run under fence {fence} lacks {key}={value}"),
                );
            }
        }
        self.ghost.last_start = Some((fence, record.round));
        self.runs.push(Run {
            replica,
            fence,
            answered: sees_answers(record),
            state_only: 0,
            last_beat: self.now,
            said: false,
            op: RunOp::Handler,
        });
    }

    /// A runner's read: decide `what` under the run's fence, or end the run
    /// (the task is gone, ended or taken over: `Keep`).
    fn run_read(&mut self, i: usize, what: RunWrite, p: &Protocol) {
        let now = self.now;
        let run = self.runs[i].clone();
        let holder = REPLICAS[usize::from(run.replica)];
        match what {
            RunWrite::Beat => self.runs[i].last_beat = now,
            RunWrite::Say => self.runs[i].said = true,
            RunWrite::Settle(_) => {}
        }
        let Some(record) = self.read() else {
            self.runs.remove(i);
            return;
        };
        if !transition::runs_under(record, holder, run.fence) {
            if what != RunWrite::Say {
                self.runs.remove(i);
            } else {
                self.runs[i].op = RunOp::Handler;
            }
            return;
        }
        let terms = p.b.lease(run.replica, now);
        let (next, reinvoke) = match what {
            RunWrite::Beat => (transition::renewed(record, terms), false),
            RunWrite::Say => (transition::with_status_message(record, "step", now), false),
            RunWrite::Settle(state_only) => transition::after_answer(
                record,
                &handler_answer(run.answered, state_only),
                now,
                run.state_only,
                terms,
            ),
        };
        self.runs[i].op = RunOp::Write {
            what,
            expect: record.version,
            next: Rec::new(next),
            reinvoke,
        };
    }

    /// A runner's write.
    fn run_write(&mut self, i: usize) {
        let RunOp::Write {
            what,
            expect,
            next,
            reinvoke,
        } = self.runs[i].op.clone()
        else {
            return;
        };
        let fence = self.runs[i].fence;
        let held = self.store.as_ref().and_then(|r| r.0.lease.as_ref());
        let held = held.map(|l| l.fence);
        let max = self.ghost.max_fence;
        match self.replace(&next, expect) {
            Ok(()) => {
                if held != Some(fence) || fence != max {
                    let how = format!("{what:?} under fence {fence} over {held:?}, newest {max}");
                    self.violate(FENCED, how);
                }
                let run = &mut self.runs[i];
                match what {
                    RunWrite::Settle(_) if reinvoke => {
                        run.state_only += 1;
                        run.op = RunOp::Handler;
                    }
                    RunWrite::Settle(_) => {
                        self.runs.remove(i);
                    }
                    _ => run.op = RunOp::Handler,
                }
            }
            Err(Lost::Conflict) => self.runs[i].op = RunOp::Retry(what),
            Err(Lost::NotFound) => {
                self.runs.remove(i);
            }
        }
    }

    fn update_read(&mut self, i: usize, p: &Protocol) {
        let Caller::Known(key) = self.callers[i].clone() else {
            return;
        };
        let (replica, inner, value) = p.b.callers[i];
        let now = self.now;
        let Some(record) = self.read() else {
            self.callers[i] = Caller::Done;
            return;
        };
        let answers = Map::from_iter([(key.clone(), json!(value))]);
        let terms = p.b.run_terms(replica, now);
        match transition::apply_answers(record, &answers, now, terms) {
            Some(next) => {
                self.callers[i] = Caller::Decided {
                    key,
                    expect: record.version,
                    next: Rec::new(next),
                };
            }
            None => {
                // Acked, nothing written (R33, R40): only when the key is
                // not outstanding in the version read.
                if record.status == TaskStatus::InputRequired
                    && record.input_requests.contains_key(&key)
                {
                    self.violate(
                        NO_DROP,
                        format!("{inner}={value} acked unwritten under {key}"),
                    );
                }
                self.callers[i] = Caller::Done;
            }
        }
    }

    fn update_write(&mut self, i: usize, p: &Protocol) {
        let Caller::Decided { key, expect, next } = self.callers[i].clone() else {
            return;
        };
        let (replica, inner, value) = p.b.callers[i];
        match self.replace(&next, expect) {
            Ok(()) => {
                self.callers[i] = Caller::Done;
                self.ghost.pending.push((inner, value));
                if next.0.status == TaskStatus::Working && !p.b.queued {
                    // Inline: the writer that resumed the task runs it.
                    self.start_run(replica, &next.0);
                }
            }
            Err(Lost::Conflict) => self.callers[i] = Caller::Known(key),
            Err(Lost::NotFound) => self.callers[i] = Caller::Done,
        }
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let created = self.b.created();
        let mut state = State {
            now: 0,
            store: None,
            callers: vec![Caller::Start; self.b.callers.len()],
            cancel: if self.b.cancel {
                Cancel::Start
            } else {
                Cancel::Done
            },
            workers: vec![Claim::Idle; if self.b.queued { 2 } else { 0 }],
            reaper: Claim::Idle,
            runs: Vec::new(),
            ghost: Ghost::default(),
        };
        state.ghost.max_fence = created.lease.as_ref().map_or(0, |l| l.fence);
        if !self.b.queued {
            state.start_run(0, &created);
        }
        state.store = Some(Rec::new(created));
        vec![state]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.ghost.violation.is_some() {
            return;
        }
        if s.now < self.b.t_max {
            actions.push(Action::Tick);
        }
        if s.store.as_ref().is_some_and(|r| r.0.is_expired(s.now)) {
            actions.push(Action::Expire);
        }
        for (i, caller) in s.callers.iter().enumerate() {
            match caller {
                Caller::Start => {
                    let inner = self.b.callers[i].1;
                    let asked = s
                        .read()
                        .is_some_and(|r| r.input_requests.values().any(|p| p.inner_key == inner));
                    if asked {
                        actions.push(Action::Get(i));
                    }
                }
                Caller::Known(_) => actions.push(Action::Update(i)),
                Caller::Decided { .. } => actions.push(Action::UpdateWrite(i)),
                Caller::Done => {}
            }
        }
        match s.cancel {
            Cancel::Start => actions.push(Action::CancelRead),
            Cancel::Decided { .. } => actions.push(Action::CancelWrite),
            Cancel::Done => {}
        }
        for (i, claim) in s.workers.iter().enumerate() {
            let replica = FIRST_WORKER + i as u8;
            match claim {
                Claim::Idle => {
                    let busy = s.runs.iter().any(|r| r.replica == replica);
                    let runnable = s
                        .read()
                        .is_some_and(|r| transition::claimable(r, s.now, self.b.rerun));
                    if !busy && runnable {
                        actions.push(Action::Scan(i));
                    }
                }
                Claim::Decided { .. } => actions.push(Action::Claim(i)),
            }
        }
        let reaps = !(self.b.queued && self.b.rerun);
        match s.reaper {
            Claim::Idle if reaps => {
                if s.read()
                    .is_some_and(|r| transition::orphaned(r, s.now, self.b.queued))
                {
                    actions.push(Action::Orphan);
                }
            }
            Claim::Idle => {}
            Claim::Decided { .. } => actions.push(Action::OrphanWrite),
        }
        for (i, run) in s.runs.iter().enumerate() {
            match &run.op {
                RunOp::Handler => {
                    if run.last_beat < s.now {
                        actions.push(Action::RunRead(i, RunWrite::Beat));
                    }
                    if self.b.status_messages && !run.said {
                        actions.push(Action::RunRead(i, RunWrite::Say));
                    }
                    actions.push(Action::RunRead(i, RunWrite::Settle(false)));
                    if self.b.state_only && run.state_only == 0 {
                        actions.push(Action::RunRead(i, RunWrite::Settle(true)));
                    }
                }
                RunOp::Write { .. } => actions.push(Action::RunWrite(i)),
                RunOp::Retry(what) => actions.push(Action::RunRead(i, *what)),
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.now;
        match action {
            Action::Tick => s.now += 1,
            Action::Expire => s.store = None,
            Action::Get(i) => {
                let inner = self.b.callers[i].1;
                let key = s.read().and_then(|r| {
                    r.input_requests
                        .iter()
                        .find(|(_, p)| p.inner_key == inner)
                        .map(|(k, _)| k.clone())
                })?;
                s.callers[i] = Caller::Known(key);
            }
            Action::Update(i) => s.update_read(i, self),
            Action::UpdateWrite(i) => s.update_write(i, self),
            Action::CancelRead => match s.read() {
                None => s.cancel = Cancel::Done,
                // Idempotent in 2026-07-28 (R45): acked.
                Some(r) if r.status.is_terminal() => {
                    s.cancel = Cancel::Done;
                    s.ghost.cancel_acked = true;
                }
                Some(r) => {
                    let next = Rec::new(transition::cancelled(r, now));
                    s.cancel = Cancel::Decided {
                        expect: r.version,
                        next,
                    };
                }
            },
            Action::CancelWrite => {
                let Cancel::Decided { expect, next } = s.cancel.clone() else {
                    return None;
                };
                match s.replace(&next, expect) {
                    Ok(()) => {
                        s.cancel = Cancel::Done;
                        s.ghost.cancel_acked = true;
                    }
                    Err(Lost::Conflict) => s.cancel = Cancel::Start,
                    Err(Lost::NotFound) => s.cancel = Cancel::Done,
                }
            }
            Action::Scan(i) => {
                let replica = FIRST_WORKER + i as u8;
                let r = s.read()?;
                let next = Rec::new(transition::claim(r, now, self.b.lease(replica, now)));
                s.workers[i] = Claim::Decided {
                    expect: r.version,
                    next,
                };
            }
            Action::Claim(i) => {
                let Claim::Decided { expect, next } = s.workers[i].clone() else {
                    return None;
                };
                s.workers[i] = Claim::Idle;
                if s.replace(&next, expect).is_ok() {
                    s.start_run(FIRST_WORKER + i as u8, &next.0);
                }
            }
            Action::Orphan => {
                let r = s.read()?;
                let next = if self.b.rerun {
                    transition::orphan_rerun(r, now, self.b.lease(REAPER, now))
                } else {
                    transition::orphan_failed(r, now)
                };
                s.reaper = Claim::Decided {
                    expect: r.version,
                    next: Rec::new(next),
                };
            }
            Action::OrphanWrite => {
                let Claim::Decided { expect, next } = s.reaper.clone() else {
                    return None;
                };
                s.reaper = Claim::Idle;
                if s.replace(&next, expect).is_ok() && next.0.status == TaskStatus::Working {
                    s.start_run(REAPER, &next.0);
                }
            }
            Action::RunRead(i, what) => s.run_read(i, what, self),
            Action::RunWrite(i) => s.run_write(i),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(TERMINAL, |_: &Protocol, s: &State| !s.broke(TERMINAL)),
            Property::always(ONE_RUN, |_: &Protocol, s: &State| !s.broke(ONE_RUN)),
            Property::always(NO_DROP, |_: &Protocol, s: &State| {
                // Acked answers are in the record until a run takes them
                // (or the task ends).
                let kept = s.terminal()
                    || s.ghost.pending.iter().all(|(key, value)| {
                        s.read()
                            .is_some_and(|r| r.input_responses.get(*key) == Some(&json!(value)))
                    });
                kept && !s.broke(NO_DROP)
            }),
            Property::always(FENCED, |_: &Protocol, s: &State| !s.broke(FENCED)),
            Property::always(CANCEL, |_: &Protocol, s: &State| {
                !s.broke(CANCEL) && (!s.ghost.cancel_acked || s.terminal())
            }),
            // Reachability: the bound explores what the properties are about.
            Property::sometimes("completed with the answers", |_: &Protocol, s: &State| {
                s.status() == Some(TaskStatus::Completed)
            }),
            Property::sometimes(
                "cancelled while a run is live",
                |_: &Protocol, s: &State| {
                    s.status() == Some(TaskStatus::Cancelled) && !s.runs.is_empty()
                },
            ),
            if self.b.rerun {
                Property::sometimes("a fenced-off run is live", |_: &Protocol, s: &State| {
                    let fence = s.read().and_then(|r| r.lease.as_ref()).map(|l| l.fence);
                    s.status() == Some(TaskStatus::Working)
                        && s.runs.iter().any(|r| Some(r.fence) < fence)
                })
            } else {
                Property::sometimes(
                    "an orphan failed while its run is live",
                    |_: &Protocol, s: &State| {
                        s.status() == Some(TaskStatus::Failed) && !s.runs.is_empty()
                    },
                )
            },
            Property::sometimes(
                "a write is about to lose to a stale read",
                |_: &Protocol, s: &State| {
                    let version = s.store.as_ref().map_or(0, |r| r.0.version);
                    s.callers
                        .iter()
                        .any(|c| matches!(c, Caller::Decided { expect, .. } if *expect != version))
                        || s.runs.iter().any(
                            |r| matches!(&r.op, RunOp::Write { expect, .. } if *expect != version),
                        )
                },
            ),
        ]
    }
}
