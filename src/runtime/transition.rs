//! The task state machine: each write's next record, as a function of the
//! current one. Pure: no I/O, no engine, no clock of its own (callers pass
//! the time and the lease terms), so every rule here is tested alone.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::answer::HandlerAnswer;
use crate::json::JsonText;
use crate::jsonrpc::JsonRpcError;
use crate::protocol::{InputRequest, TaskStatus};
use crate::store::{Era, Lease, PendingInput, TaskOutcome, TaskRecord};

/// How many times in a row a handler may answer with `requestState` alone
/// before the task fails (it would otherwise loop forever).
pub(crate) const MAX_STATE_ONLY_ROUNDS: u32 = 16;

/// The lease a write takes or renews: this replica's name, and until when.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaseTerms<'a> {
    pub(crate) holder: &'a str,
    pub(crate) until_ms: i64,
}

impl LeaseTerms<'_> {
    /// A lease for this replica, taking over from `prev` (one fence more).
    pub(crate) fn take_over(&self, prev: Option<&Lease>) -> Lease {
        Lease {
            holder: self.holder.to_owned(),
            fence: prev.map_or(1, |l| l.fence + 1),
            until_ms: self.until_ms,
        }
    }

    /// `lease` held on until these terms' end.
    pub(crate) fn renew(&self, lease: &mut Lease) {
        lease.until_ms = self.until_ms;
    }
}

/// Whether `holder` holds `record`'s lease under `fence` (whatever its
/// status).
pub(crate) fn held_by(record: &TaskRecord, holder: &str, fence: u64) -> bool {
    record
        .lease
        .as_ref()
        .is_some_and(|l| l.holder == holder && l.fence == fence)
}

/// Whether a runner of `holder` under `fence` may still write `record`: it
/// is `working` and the lease is still that run's. Every runner write
/// (its answer, a heartbeat, a status message) is decided under this.
pub(crate) fn runs_under(record: &TaskRecord, holder: &str, fence: u64) -> bool {
    record.status == TaskStatus::Working && held_by(record, holder, fence)
}

/// Whether a worker may claim `record` at `now_ms`: `working` and queued,
/// or orphaned (its runner's lease ran out) when `rerun_orphans`.
pub(crate) fn claimable(record: &TaskRecord, now_ms: i64, rerun_orphans: bool) -> bool {
    match &record.lease {
        Some(lease) if record.status == TaskStatus::Working => {
            lease.is_queued() || (rerun_orphans && lease.until_ms < now_ms)
        }
        _ => false,
    }
}

/// What a claimable `record` becomes when a worker with `lease` terms
/// claims it: a queued run keeps its round, an orphan's is a run again from
/// the top (both one fence more).
pub(crate) fn claim(record: &TaskRecord, now_ms: i64, lease: LeaseTerms<'_>) -> TaskRecord {
    if record.lease.as_ref().is_some_and(Lease::is_queued) {
        claimed(record, lease)
    } else {
        orphan_rerun(record, now_ms, lease)
    }
}

/// Whether `record` is an orphan at `now_ms` for the reaper: `working` and
/// its lease (if any) ran out. With `queued` execution a run waiting in
/// the queue is a worker's, not an orphan.
pub(crate) fn orphaned(record: &TaskRecord, now_ms: i64, queued: bool) -> bool {
    record.status == TaskStatus::Working
        && record.lease.as_ref().is_none_or(|l| l.until_ms < now_ms)
        && !(queued && record.lease.as_ref().is_some_and(Lease::is_queued))
}

/// The next version of `record` with the outstanding ones among `answers`
/// merged in, or `None` when no outstanding key is answered. When that
/// answers the last outstanding key, the task is `working` again under a
/// new lease: the writer that wins this transition runs the handler.
pub(crate) fn apply_answers(
    record: &TaskRecord,
    answers: &Map<String, Value>,
    now_ms: i64,
    lease: LeaseTerms<'_>,
) -> Option<TaskRecord> {
    if record.status != TaskStatus::InputRequired
        || !answers
            .keys()
            .any(|k| record.input_requests.contains_key(k))
    {
        return None;
    }
    let mut next = next_without_inputs(record, now_ms);
    for (key, pending) in &record.input_requests {
        match answers.get(key) {
            // A later answer to the same inner key wins.
            Some(answer) => {
                next.input_responses
                    .insert(pending.inner_key.clone(), answer.clone());
            }
            None => {
                next.input_requests.insert(key.clone(), pending.clone());
            }
        }
    }
    if next.input_requests.is_empty() {
        next.status = TaskStatus::Working;
        next.status_message = None;
        next.round += 1;
        next.lease = Some(lease.take_over(record.lease.as_ref()));
    }
    Some(next)
}

/// The next version of a `working` record after its handler's `answer`,
/// and whether the handler is to be called again at once (it answered with
/// `requestState` alone; `state_only` such rounds came before this one).
pub(crate) fn after_answer(
    record: &TaskRecord,
    answer: &HandlerAnswer,
    now_ms: i64,
    state_only: u32,
    lease: LeaseTerms<'_>,
) -> (TaskRecord, bool) {
    let refused = match answer {
        HandlerAnswer::Input { requests, .. } => {
            undeclared(record.era, record.meta.as_ref(), requests)
        }
        _ => None,
    };
    let mut next = match answer {
        // The new requests replace the old.
        HandlerAnswer::Input { .. } if refused.is_none() => next_without_inputs(record, now_ms),
        HandlerAnswer::StateOnly(_) if state_only < MAX_STATE_ONLY_ROUNDS => {
            record.next_version(now_ms)
        }
        // Every other answer finishes the task.
        _ => next_finished(record, now_ms),
    };
    let mut reinvoke = false;
    match answer {
        HandlerAnswer::Result(result, tool_error) => {
            // 2025-11-25 marks a tool error `failed` (R69); 2026-07-28
            // keeps it `completed` (R22).
            let status = if *tool_error && record.era == Era::Legacy {
                TaskStatus::Failed
            } else {
                TaskStatus::Completed
            };
            finish(
                &mut next,
                status,
                Some(TaskOutcome::Result(result.clone())),
                None,
            );
        }
        HandlerAnswer::Error(e) => fail(&mut next, e.clone()),
        HandlerAnswer::Input { requests, state } => match refused {
            Some(error) => fail(&mut next, error),
            None => {
                expose_keys(&mut next, requests);
                next.status = TaskStatus::InputRequired;
                next.status_message = Some("The task is waiting for input.".into());
                next.request_state = state.clone();
            }
        },
        HandlerAnswer::StateOnly(state) if state_only < MAX_STATE_ONLY_ROUNDS => {
            next.request_state = Some(state.clone());
            next.round += 1;
            if let Some(l) = &mut next.lease {
                lease.renew(l);
            }
            reinvoke = true;
        }
        HandlerAnswer::StateOnly(_) => fail(
            &mut next,
            JsonRpcError::internal("the tool kept answering with requestState alone"),
        ),
    }
    (next, reinvoke)
}

/// The finished record of a task whose handler answered before the task
/// was first written (2026-07-28): `working` is the record it would have
/// been written as.
pub(crate) fn finished_at_once(working: &TaskRecord, answer: HandlerAnswer) -> TaskRecord {
    let mut done = next_finished(working, working.created_at_ms);
    match answer {
        // A 2026-07-28 tool error stays `completed` (R22).
        HandlerAnswer::Result(result, _) => finish(
            &mut done,
            TaskStatus::Completed,
            Some(TaskOutcome::Result(result)),
            None,
        ),
        HandlerAnswer::Error(e) => fail(&mut done, e),
        // Input requests were answered as MRTR before the task.
        HandlerAnswer::Input { .. } | HandlerAnswer::StateOnly(_) => fail(
            &mut done,
            JsonRpcError::internal("the tool asked for input in an unexpected way"),
        ),
    }
    done
}

/// The next version of a task its client cancels.
pub(crate) fn cancelled(record: &TaskRecord, now_ms: i64) -> TaskRecord {
    cancelled_because(record, now_ms, "The task was cancelled by the client.")
}

/// The next version of a task an operator cancels.
pub(crate) fn cancelled_by_operator(record: &TaskRecord, now_ms: i64) -> TaskRecord {
    cancelled_because(record, now_ms, "The task was cancelled by an operator.")
}

fn cancelled_because(record: &TaskRecord, now_ms: i64, why: &str) -> TaskRecord {
    let mut next = next_finished(record, now_ms);
    finish(&mut next, TaskStatus::Cancelled, None, Some(why.into()));
    next.cancel_requested = true;
    next
}

/// The next version of a `working` task whose runner died, run again from
/// the top under a new lease.
pub(crate) fn orphan_rerun(record: &TaskRecord, now_ms: i64, lease: LeaseTerms<'_>) -> TaskRecord {
    let mut next = record.next_version(now_ms);
    next.lease = Some(lease.take_over(record.lease.as_ref()));
    next.round += 1;
    // The dead run's progress note would be a lie about the new one.
    next.status_message = None;
    next
}

/// The next version of a queued task that a worker claims: its lease, one
/// fence more. Not a change clients see (`lastUpdatedAt` stays, as for a
/// renewal); the run is the one that was queued (same round).
pub(crate) fn claimed(record: &TaskRecord, lease: LeaseTerms<'_>) -> TaskRecord {
    let mut next = record.clone();
    next.version += 1;
    next.lease = Some(lease.take_over(record.lease.as_ref()));
    next
}

/// The next version of a task a worker claimed and never ran: queued
/// again under `queue`'s terms, one fence more, nothing else changed (as
/// its claim, not a change clients see).
pub(crate) fn unclaimed(record: &TaskRecord, queue: LeaseTerms<'_>) -> TaskRecord {
    let mut next = record.clone();
    next.version += 1;
    next.lease = Some(queue.take_over(record.lease.as_ref()));
    next
}

/// The next version of a `working` task whose runner shut down before its
/// handler answered, failed with a message that says so.
pub(crate) fn shut_down(record: &TaskRecord, now_ms: i64) -> TaskRecord {
    let mut next = record.next_version(now_ms);
    fail(
        &mut next,
        JsonRpcError::internal(
            "the server running this task shut down before the task finished; it was not re-run",
        ),
    );
    next
}

/// The next version of a `working` task whose handler set `message` as its
/// status message.
pub(crate) fn with_status_message(record: &TaskRecord, message: &str, now_ms: i64) -> TaskRecord {
    let mut next = record.next_version(now_ms);
    next.status_message = Some(message.to_owned());
    next
}

/// The next version of a `working` task whose runner died, failed.
pub(crate) fn orphan_failed(record: &TaskRecord, now_ms: i64) -> TaskRecord {
    let mut next = record.next_version(now_ms);
    fail(
        &mut next,
        JsonRpcError::internal(
            "the server running this task stopped or restarted before the task finished; it cannot be resumed",
        ),
    );
    next
}

/// The next version of a `working` task whose runner renews its lease: not
/// a change clients see (`lastUpdatedAt` stays).
pub(crate) fn renewed(record: &TaskRecord, lease: LeaseTerms<'_>) -> TaskRecord {
    let mut next = record.clone();
    next.version += 1;
    if let Some(l) = &mut next.lease {
        lease.renew(l);
    }
    next
}

/// `r.next_version(now_ms)` for a write that [`finish`]es the task: what
/// `finish` clears (arguments, `_meta`, answers, request state, outcome,
/// lease, recovery policy) is not copied.
pub(crate) fn next_finished(r: &TaskRecord, now_ms: i64) -> TaskRecord {
    TaskRecord {
        id: r.id.clone(),
        owner: r.owner.clone(),
        era: r.era,
        status: r.status,
        status_message: r.status_message.clone(),
        created_at_ms: r.created_at_ms,
        updated_at_ms: r.updated_at_ms.max(now_ms),
        ttl_ms: r.ttl_ms,
        poll_interval_ms: r.poll_interval_ms,
        version: r.version + 1,
        tool_name: r.tool_name.clone(),
        arguments: None,
        meta: None,
        request_state: None,
        round: r.round,
        input_requests: Default::default(),
        issued_keys: Default::default(),
        input_responses: Default::default(),
        outcome: None,
        cancel_requested: r.cancel_requested,
        lease: None,
        recovery: None,
        history: r.history.clone(),
        sealed: Default::default(),
    }
}

/// `r.next_version(now_ms)` without its outstanding input requests, for a
/// write that replaces them (not copied only to be dropped).
fn next_without_inputs(r: &TaskRecord, now_ms: i64) -> TaskRecord {
    TaskRecord {
        arguments: r.arguments.clone(),
        meta: r.meta.clone(),
        request_state: r.request_state.clone(),
        issued_keys: r.issued_keys.clone(),
        input_responses: r.input_responses.clone(),
        outcome: r.outcome.clone(),
        lease: r.lease.clone(),
        recovery: r.recovery,
        ..next_finished(r, now_ms)
    }
}

/// Fail a record with `e`, its message the status message.
pub(crate) fn fail(next: &mut TaskRecord, e: JsonRpcError) {
    let message = Some(e.message.clone());
    finish(
        next,
        TaskStatus::Failed,
        Some(TaskOutcome::Error(e)),
        message,
    );
}

/// Make a record terminal and drop what only a resume needed.
fn finish(
    next: &mut TaskRecord,
    status: TaskStatus,
    outcome: Option<TaskOutcome>,
    message: Option<String>,
) {
    next.status = status;
    next.outcome = outcome;
    next.status_message = message;
    next.input_requests.clear();
    next.issued_keys.clear();
    next.input_responses.clear();
    next.arguments = None;
    next.meta = None;
    next.request_state = None;
    next.lease = None;
    next.recovery = None;
}

/// Give each inner key a key never shown before for this task: the inner
/// key itself the first time, then `key.2`, `key.3`, ... (R36, R37).
fn expose_keys(next: &mut TaskRecord, requests: &BTreeMap<String, InputRequest>) {
    next.input_requests.clear();
    for (inner, request) in requests {
        let mut key = inner.clone();
        let mut n = 2u64;
        while next.issued_keys.contains(&key) {
            key = format!("{inner}.{n}");
            n += 1;
        }
        next.issued_keys.insert(key.clone());
        next.input_requests.insert(
            key,
            PendingInput {
                inner_key: inner.clone(),
                request: request.clone(),
            },
        );
    }
}

/// The `-32021` error if a request needs a client capability the original
/// 2026-07-28 call did not declare (R39).
fn undeclared(
    era: Era,
    meta: Option<&JsonText>,
    requests: &BTreeMap<String, InputRequest>,
) -> Option<JsonRpcError> {
    // 2025-11-25 clients declare capabilities once, at `initialize`, which
    // the layer does not see; the transport's peer refuses what it cannot do.
    if era != Era::Modern {
        return None;
    }
    /// Only the capabilities out of the stored `_meta` text.
    #[derive(serde::Deserialize)]
    struct Declared {
        #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
        capabilities: Option<Value>,
    }
    let declared = meta.and_then(|m| serde_json::from_str::<Declared>(m.get()).ok());
    let caps = declared.as_ref().and_then(|d| d.capabilities.as_ref());
    for request in requests.values() {
        let declared = request
            .required_capability()
            .is_some_and(|cap| caps.and_then(|c| c.get(cap)).is_some_and(Value::is_object));
        if !declared {
            let cap = request.required_capability().unwrap_or("unknown");
            let mut e = JsonRpcError::missing_capability(json!({ cap: {} }));
            e.message = format!(
                "The tool asked for {}, which the client did not declare",
                request.method
            );
            return Some(e);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_its_recovery_policy_and_an_old_one_has_none() {
        let mut r = TaskRecord::new("t", Era::Modern, "tool", json!({}), 5, None);
        r.recovery = Some(crate::config::Recovery::Rerun);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""recovery":"rerun""#), "{text}");
        let back: TaskRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        // Written before the field existed: the recovering replica decides.
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        old.as_object_mut().unwrap().remove("recovery");
        let old: TaskRecord = serde_json::from_value(old).unwrap();
        assert_eq!(old.recovery, None);
        // Kept while the task may still be recovered, dropped at its end.
        let asked = after_answer(
            &r,
            &HandlerAnswer::StateOnly("s".into()),
            6,
            0,
            LeaseTerms {
                holder: "h",
                until_ms: 9,
            },
        );
        assert_eq!(asked.0.recovery, r.recovery);
        assert_eq!(cancelled(&r, 7).recovery, None);
    }

    #[test]
    fn a_finished_next_version_is_the_cleared_clone() {
        let mut r = TaskRecord::new("t", Era::Modern, "tool", json!({"a": 1}), 5, Some(9))
            .with_owner(Some("o".into()));
        r.status_message = Some("m".into());
        r.meta = Some(JsonText::from_value(&json!({"k": true})));
        r.request_state = Some("s".into());
        r.round = 3;
        r.issued_keys.insert("q".into());
        r.input_responses.insert("q".into(), json!({"x": 1}));
        r.cancel_requested = true;
        r.poll_interval_ms = Some(7);
        r.lease = Some(Lease {
            holder: "h".into(),
            fence: 2,
            until_ms: 50,
        });
        r.recovery = Some(crate::config::Recovery::Rerun);
        for now in [1, 100] {
            let mut cloned = r.next_version(now);
            let mut built = next_finished(&r, now);
            for next in [&mut cloned, &mut built] {
                finish(
                    next,
                    TaskStatus::Failed,
                    Some(TaskOutcome::Error(JsonRpcError::internal("x"))),
                    Some("x".into()),
                );
            }
            assert_eq!(built, cloned);
        }
    }

    #[test]
    fn a_handlers_message_is_one_new_version_and_a_rerun_starts_without_it() {
        let mut r = TaskRecord::new("t", Era::Modern, "tool", json!({"a": 1}), 5, None);
        r.lease = Some(Lease {
            holder: "h".into(),
            fence: 2,
            until_ms: 50,
        });
        let said = with_status_message(&r, "step 1 of 2", 9);
        assert_eq!(said.status_message.as_deref(), Some("step 1 of 2"));
        assert_eq!((said.version, said.updated_at_ms), (r.version + 1, 9));
        assert_eq!(said.lease, r.lease, "the run keeps its lease");
        let terms = LeaseTerms {
            holder: "other",
            until_ms: 99,
        };
        let rerun = orphan_rerun(&said, 10, terms);
        assert_eq!(rerun.status_message, None);
        assert_eq!(rerun.lease.as_ref().map(|l| l.fence), Some(3));
    }
}
