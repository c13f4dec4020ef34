//! Model checking of the task protocol (issue 31), with stateright: the
//! real state machine ([`transition`]: every next record and every guard a
//! writer decides under) driven through the compare-and-set protocol of
//! [`cas`](super::cas) by every actor that writes a task, in every
//! interleaving, up to a bound.
//!
//! One task, stored as one record. Each write is split as the engine does
//! it: a read that decides the next record (from the version read and the
//! clock at that moment), then a write conditional on that version, which
//! loses to any write in between (a stale read) and then reads again. The
//! actors:
//!
//! - callers answering with `tasks/update`: each reads the task
//!   (`tasks/get`) for the key of its inner request, then sends its answer
//!   under that key, possibly late, after another round exposed new keys;
//! - a caller sending `tasks/cancel`;
//! - runners, one per run started: a heartbeat (at most once per clock
//!   tick), one status message, and the handler's answer (a result once
//!   both answers are in, else a round of input requests for `a` and `b`;
//!   once `requestState` alone, which calls it again in the same run);
//! - with queued execution, two workers that claim queued runs and, under
//!   [`Recovery::Rerun`](crate::Recovery::Rerun), orphans (a new fence);
//!   inline, the caller whose answers resume the task runs it;
//! - the reaper: orphan recovery by policy, and deleting the expired task;
//! - the clock: leases run out, the task expires.
//!
//! The ghost state ([`Ghost`]) records what the properties need: the fence
//! and round of the last run started, the answers acked since, whether the
//! cancel was acked, and the first violation seen.

mod actors;
#[cfg(test)]
mod tests;

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::json;

use super::transition::LeaseTerms;
use crate::json::JsonText;
use crate::protocol::TaskStatus;
use crate::store::{Era, Lease, TaskRecord};

/// Replica names, the holders of leases: two fronts, then two workers.
pub(super) const REPLICAS: [&str; 4] = ["f1", "f2", "w1", "w2"];
/// The replica whose reaper recovers orphans.
pub(super) const REAPER: u8 = 1;
/// The first worker's index in [`REPLICAS`].
pub(super) const FIRST_WORKER: u8 = 2;

/// What is explored: the configuration and the bounds.
#[derive(Clone, Debug)]
pub(super) struct Bounds {
    /// Queued execution (workers claim runs) rather than inline.
    pub(super) queued: bool,
    /// Orphans re-run (rather than failed).
    pub(super) rerun: bool,
    /// The clock stops here.
    pub(super) t_max: i64,
    /// A lease's length.
    pub(super) lease_ms: i64,
    /// The task's lifetime (it expires at this time).
    pub(super) ttl_ms: u64,
    /// Callers: the front replica they ask, the handler's key they answer,
    /// and their answer.
    pub(super) callers: Vec<(u8, &'static str, i64)>,
    /// Whether a caller cancels.
    pub(super) cancel: bool,
    /// Whether the handler may answer with `requestState` alone once.
    pub(super) state_only: bool,
    /// Whether runs write a status message.
    pub(super) status_messages: bool,
}

/// The protocol under these bounds.
#[derive(Clone, Debug)]
pub(super) struct Protocol {
    pub(super) b: Bounds,
}

/// A stored record, hashed on every field a model write can change (the
/// others are the same in every record of the model).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rec(pub(super) Arc<TaskRecord>);

impl Rec {
    pub(super) fn new(record: TaskRecord) -> Self {
        Rec(Arc::new(record))
    }
}

impl Eq for Rec {}

impl Hash for Rec {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let r = &self.0;
        r.status.hash(h);
        r.status_message.hash(h);
        r.updated_at_ms.hash(h);
        r.version.hash(h);
        r.round.hash(h);
        r.request_state.hash(h);
        r.arguments.is_some().hash(h);
        r.meta.is_some().hash(h);
        for (key, pending) in &r.input_requests {
            (key, &pending.inner_key).hash(h);
        }
        r.issued_keys.hash(h);
        for (key, value) in &r.input_responses {
            (key, value.to_string()).hash(h);
        }
        serde_json::to_string(&r.outcome)
            .unwrap_or_default()
            .hash(h);
        r.cancel_requested.hash(h);
        r.lease
            .as_ref()
            .map(|l| (&l.holder, l.fence, l.until_ms))
            .hash(h);
    }
}

/// A caller answering with `tasks/update`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Caller {
    /// Has not read the task yet.
    Start,
    /// Read the key its answer goes under; sends (again after a lost race).
    Known(String),
    /// Decided the next record over version `expect`.
    Decided { key: String, expect: u64, next: Rec },
    /// Answered: acked, or refused (the task was gone).
    Done,
}

/// The caller of `tasks/cancel`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Cancel {
    Start,
    Decided { expect: u64, next: Rec },
    Done,
}

/// A worker's claim in flight, or the reaper's orphan recovery.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Claim {
    Idle,
    Decided { expect: u64, next: Rec },
}

/// What a runner writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum RunWrite {
    /// A heartbeat: its lease renewed.
    Beat,
    /// A status message.
    Say,
    /// The handler's answer; `true` for `requestState` alone.
    Settle(bool),
}

/// Where a runner is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum RunOp {
    /// The handler runs.
    Handler,
    /// Read and decided: the write over version `expect`.
    Write {
        what: RunWrite,
        expect: u64,
        next: Rec,
        reinvoke: bool,
    },
    /// Lost a race: reads again and decides again.
    Retry(RunWrite),
}

/// A run: a handler started under a fence, on a replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Run {
    pub(super) replica: u8,
    pub(super) fence: u64,
    /// Whether the handler saw both answers (it then answers with a result).
    pub(super) answered: bool,
    /// Rounds answered with `requestState` alone so far.
    pub(super) state_only: u32,
    /// The clock at its last heartbeat.
    pub(super) last_beat: i64,
    /// Whether it wrote (or tried) its status message.
    pub(super) said: bool,
    pub(super) op: RunOp,
}

/// The history the properties read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Ghost {
    /// Fence and round of the last run started.
    pub(super) last_start: Option<(u64, u32)>,
    /// The highest fence any written record carried.
    pub(super) max_fence: u64,
    /// Answers acked (written) since the last run started: inner key, value.
    pub(super) pending: Vec<(&'static str, i64)>,
    /// Whether `tasks/cancel` was acked.
    pub(super) cancel_acked: bool,
    /// The first property broken, and how.
    pub(super) violation: Option<(&'static str, String)>,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    pub(super) now: i64,
    /// The record; `None` once the reaper deleted it.
    pub(super) store: Option<Rec>,
    pub(super) callers: Vec<Caller>,
    pub(super) cancel: Cancel,
    /// The workers' claims (queued execution).
    pub(super) workers: Vec<Claim>,
    pub(super) reaper: Claim,
    pub(super) runs: Vec<Run>,
    pub(super) ghost: Ghost,
}

/// Every action of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Tick,
    /// The reaper deletes the expired task.
    Expire,
    /// Caller `i` reads the task for its key.
    Get(usize),
    /// Caller `i` reads and decides its `tasks/update`.
    Update(usize),
    /// Caller `i` writes it.
    UpdateWrite(usize),
    CancelRead,
    CancelWrite,
    /// Worker `i` reads a runnable record and decides its claim.
    Scan(usize),
    Claim(usize),
    /// The reaper reads an orphan and decides its recovery.
    Orphan,
    OrphanWrite,
    /// Run `i` reads and decides a write.
    RunRead(usize, RunWrite),
    /// Run `i` writes what it decided.
    RunWrite(usize),
}

impl Bounds {
    /// The lease terms of `replica` at `now`.
    pub(super) fn lease(&self, replica: u8, now: i64) -> LeaseTerms<'static> {
        LeaseTerms {
            holder: REPLICAS[usize::from(replica)],
            until_ms: now + self.lease_ms,
        }
    }

    /// The lease a run started by answers takes (`Engine::run_terms`).
    pub(super) fn run_terms(&self, replica: u8, now: i64) -> LeaseTerms<'static> {
        if self.queued {
            LeaseTerms {
                holder: Lease::QUEUED,
                until_ms: now - 1,
            }
        } else {
            self.lease(replica, now)
        }
    }

    /// The task as `tools/call` writes it at time 0: `working`, held by
    /// front `f1` (which runs it) or queued.
    pub(super) fn created(&self) -> TaskRecord {
        let mut r = TaskRecord::new(
            "t",
            Era::Modern,
            "tool",
            json!({"x": 1}),
            0,
            Some(self.ttl_ms),
        );
        r.meta = Some(JsonText::from_value(&json!({
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}
        })));
        let terms = if self.queued {
            self.run_terms(0, 0)
        } else {
            self.lease(0, 0)
        };
        r.lease = Some(terms.take_over(None));
        r
    }
}

impl State {
    /// The record as a read sees it: hidden once expired.
    pub(super) fn read(&self) -> Option<&TaskRecord> {
        self.store
            .as_ref()
            .map(|r| &*r.0)
            .filter(|r| !r.is_expired(self.now))
    }

    /// Record the first violation.
    pub(super) fn violate(&mut self, property: &'static str, how: String) {
        if self.ghost.violation.is_none() {
            self.ghost.violation = Some((property, how));
        }
    }

    /// Whether `property` was broken.
    pub(super) fn broke(&self, property: &str) -> bool {
        self.ghost
            .violation
            .as_ref()
            .is_some_and(|(p, _)| *p == property)
    }

    /// Whether the stored record (if readable) is terminal.
    pub(super) fn terminal(&self) -> bool {
        self.read().is_none_or(|r| r.status.is_terminal())
    }

    /// The status of the stored record, if readable.
    pub(super) fn status(&self) -> Option<TaskStatus> {
        self.read().map(|r| r.status)
    }
}

/// Property names.
pub(super) const TERMINAL: &str = "a terminal state never changes";
pub(super) const ONE_RUN: &str = "each round of answers starts at most one run";
pub(super) const NO_DROP: &str = "no acked answer is dropped";
pub(super) const FENCED: &str = "a write with an old fence never lands";
pub(super) const CANCEL: &str = "a cancelled task never starts a run after the cancel is acked";
