//! The gateway's calls to the upstream: those in flight (so that what the
//! upstream sends for a call reaches it) and those parked while their
//! questions wait for the client's answers. Every entry is forgotten when
//! its call ends, its connection ends, its task ends or its wait expires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::call::{call_ended, UpstreamCall};
use super::config::ParkLimits;
use super::events::{call_of_token, CallEvent, Registry};
use super::notices::{Notices, LOG_MESSAGE, TOOLS_CHANGED};
use crate::jsonrpc::JsonRpcError;
use crate::runtime::TaskHandle;
use crate::upstream::link::{Inbound, InboundSink, Link};

/// Events queued for one call before the upstream's extra progress is
/// dropped (questions are refused instead).
const EVENTS: usize = 64;

struct Running {
    events: mpsc::Sender<CallEvent>,
    /// Waiting for the client's answers: its upstream request cannot be
    /// the one asking anew.
    parked: bool,
}

/// A call waiting for answers, under the key its `requestState` carries.
struct Parked {
    call: UpstreamCall,
    owner: Option<String>,
    handle: Option<TaskHandle>,
    /// Ends the wait's timer when the call leaves the table.
    left: CancellationToken,
    /// The method of the request it answers: only its retry goes on with it.
    method: String,
}

/// The parked calls by key, and by task where the task is known: a call
/// parked before its task existed (the question made the task) is looked
/// at once more, when a task ends, to learn its task.
#[derive(Default)]
struct ParkedTable {
    by_key: HashMap<String, Parked>,
    by_task: HashMap<String, String>,
    unbound: Vec<String>,
    /// How many each owner has parked; an owner with none has no entry.
    per_owner: HashMap<Option<String>, usize>,
}

impl ParkedTable {
    /// Whether one more call may park: `None`, or why not.
    fn refuse(&self, owner: Option<&String>, limits: ParkLimits) -> Option<JsonRpcError> {
        if self.by_key.len() >= limits.max {
            return Some(too_many_parked(limits.max));
        }
        let mine = self.per_owner.get(&owner.cloned()).copied().unwrap_or(0);
        (mine >= limits.per_owner).then(|| {
            JsonRpcError::invalid_params(format!(
                "this client already has {mine} calls waiting for answers, the most one client \
                 may have; answer or cancel one first"
            ))
        })
    }

    fn insert(&mut self, key: String, parked: Parked) {
        *self.per_owner.entry(parked.owner.clone()).or_default() += 1;
        match parked.handle.as_ref().map(TaskHandle::id) {
            Some(Some(task)) => {
                self.by_task.insert(task.to_owned(), key.clone());
            }
            Some(None) => self.unbound.push(key.clone()),
            None => {}
        }
        self.by_key.insert(key, parked);
    }

    fn remove(&mut self, key: &str) -> Option<Parked> {
        let parked = self.by_key.remove(key)?;
        self.leaving(&parked);
        // Not looked at again by a task's end: gone.
        if let Some(at) = self.unbound.iter().position(|k| k == key) {
            self.unbound.swap_remove(at);
        }
        if let Some(task) = parked.handle.as_ref().and_then(TaskHandle::id) {
            if self.by_task.get(task).is_some_and(|k| k == key) {
                self.by_task.remove(task);
            }
        }
        Some(parked)
    }

    /// The call parked for task `task_id`, taken out. Each call parked
    /// without a task is looked at here until its task is known (or it
    /// left): the work a task's end costs stays bounded.
    fn take_task(&mut self, task_id: &str) -> Option<Parked> {
        let unbound = std::mem::take(&mut self.unbound);
        for key in unbound {
            let Some(parked) = self.by_key.get(&key) else {
                continue;
            };
            match parked.handle.as_ref().and_then(TaskHandle::id) {
                Some(task) => {
                    self.by_task.insert(task.to_owned(), key);
                }
                None => self.unbound.push(key),
            }
        }
        let key = self.by_task.remove(task_id)?;
        let parked = self.by_key.remove(&key)?;
        self.leaving(&parked);
        Some(parked)
    }

    /// `parked` leaves the table: its wait's timer ends, and its owner
    /// counts one fewer.
    fn leaving(&mut self, parked: &Parked) {
        parked.left.cancel();
        if let Some(n) = self.per_owner.get_mut(&parked.owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&parked.owner);
            }
        }
    }
}

/// Both tables.
pub(crate) struct Calls {
    running: Mutex<HashMap<(u64, u64), Running, crate::hashing::Own>>,
    parked: Mutex<ParkedTable>,
    limits: ParkLimits,
    /// Where the notifications that belong to no call go.
    notices: Notices,
    me: Weak<Calls>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a call cannot be parked.
pub(crate) fn too_many_parked(max: usize) -> JsonRpcError {
    JsonRpcError::internal(format!(
        "the gateway already holds {max} calls waiting for answers"
    ))
}

impl Calls {
    pub(crate) fn new(limits: ParkLimits, notices: Notices) -> Arc<Self> {
        Arc::new_cyclic(|me| Calls {
            running: Mutex::default(),
            parked: Mutex::default(),
            limits,
            notices,
            me: Weak::clone(me),
        })
    }

    /// A call `id` on link `serial` starts: its events channel.
    pub(crate) fn register(&self, serial: u64, id: u64) -> mpsc::Receiver<CallEvent> {
        let (tx, rx) = mpsc::channel(EVENTS);
        lock(&self.running).insert(
            (serial, id),
            Running {
                events: tx,
                parked: false,
            },
        );
        rx
    }

    /// How many calls are in flight (parked ones included).
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.running).len()
    }

    /// How many calls wait for answers.
    pub(crate) fn parked(&self) -> usize {
        lock(&self.parked).by_key.len()
    }

    /// Park `call` under a new key bound to `owner`, until its answers come
    /// or its wait expires.
    pub(crate) fn park(
        &self,
        mut call: UpstreamCall,
        owner: Option<String>,
        handle: Option<TaskHandle>,
        key: String,
        method: &str,
    ) -> Result<(), JsonRpcError> {
        let serial = call.serial();
        let id = call.id();
        let task = handle.clone();
        let left = CancellationToken::new();
        {
            let mut parked = lock(&self.parked);
            // Under the table's lock: a link closed later takes its
            // parked calls out (`link_over`); one closed before takes none.
            if call.link_closed() {
                return Err(JsonRpcError::internal(
                    "the upstream connection ended while the call asked its questions",
                ));
            }
            if let Some(refusal) = parked.refuse(owner.as_ref(), self.limits) {
                return Err(refusal);
            }
            call.park_lane();
            parked.insert(
                key.clone(),
                Parked {
                    call,
                    owner,
                    handle,
                    left: left.clone(),
                    method: method.to_owned(),
                },
            );
        }
        if let Some(r) = lock(&self.running).get_mut(&(serial, id)) {
            r.parked = true;
        }
        let me = Weak::clone(&self.me);
        let ttl = self.limits.ttl;
        tokio::spawn(async move {
            // Its task's token trips when the task expires here (the
            // reaper) or is cancelled: no event says so for an expired one.
            let ended = async {
                match &task {
                    Some(task) => task.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(ttl) => {}
                () = ended => {}
                // Answered, or gone another way: no timer waits the TTL
                // out for it.
                () = left.cancelled() => return,
            }
            if let Some(calls) = me.upgrade() {
                // Still there: nobody answered in time, or its task is
                // over; dropping it cancels the upstream request.
                if calls.take_any(&key).is_some() {
                    tracing::info!("a call waiting for answers expired");
                }
            }
        });
        Ok(())
    }

    /// The call parked under `key`, if `owner` parked it for a request of
    /// `method` (an MRTR retry is the same request). It still counts
    /// as waiting (a question on its connection is not its) until
    /// [`resumed`](Self::resumed): over stdio it may wait first for the
    /// call active on its process to end.
    pub(crate) fn unpark(
        &self,
        key: &str,
        owner: Option<&str>,
        method: &str,
    ) -> Option<UpstreamCall> {
        let mut parked = lock(&self.parked);
        let p = parked.by_key.get(key)?;
        if p.owner.as_deref() != owner || p.method != method {
            return None;
        }
        parked.remove(key).map(|p| p.call)
    }

    /// `call`, unparked, runs again: what its connection asks now may be
    /// its.
    pub(crate) fn resumed(&self, call: &UpstreamCall) {
        if let Some(r) = lock(&self.running).get_mut(&(call.serial(), call.id())) {
            r.parked = false;
        }
    }

    fn take_any(&self, key: &str) -> Option<UpstreamCall> {
        lock(&self.parked).remove(key).map(|p| p.call)
    }

    /// Task `task_id` ended (cancelled, expired, failed elsewhere): a call
    /// parked for it is dropped, which cancels it upstream.
    pub(crate) fn task_ended(&self, task_id: &str) {
        let dropped = lock(&self.parked).take_task(task_id);
        drop(dropped);
    }

    /// Link `serial` is over: its parked calls can never go on.
    fn link_over(&self, serial: u64) {
        let dropped: Vec<Parked> = {
            let mut parked = lock(&self.parked);
            let keys: Vec<String> = parked
                .by_key
                .iter()
                .filter(|(_, p)| p.call.serial() == serial)
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| parked.remove(k)).collect()
        };
        drop(dropped);
        lock(&self.running).retain(|(s, _), _| *s != serial);
    }

    /// The call a question or log message over `link` belongs to: the
    /// request whose answer stream carried it (Streamable HTTP), and no
    /// other, even when it has ended, and none if it came on no request's
    /// stream (the session's `GET` stream: one link carries every client's
    /// calls); over stdio nothing in the message says, so it is the one
    /// call in flight that is not waiting for answers (or, if all are, the
    /// one call), and none once a call on the link ended unanswered: its
    /// handler may still run, and its messages could not be told from a
    /// call's that resumes there.
    fn asker(&self, link: &Link, related: Option<u64>) -> Result<mpsc::Sender<CallEvent>, NoCall> {
        let serial = link.serial;
        let running = lock(&self.running);
        if link.says_request && related.is_none() {
            return Err(NoCall::Outside);
        }
        if let Some(id) = related {
            // Never another call on the link: over HTTP one link carries
            // every client's calls.
            return running
                .get(&(serial, id))
                .map(|r| r.events.clone())
                .ok_or(NoCall::Ended);
        }
        if link.is_tainted() {
            return Err(NoCall::Tainted);
        }
        let on_link: Vec<&Running> = running
            .iter()
            .filter(|((s, _), _)| *s == serial)
            .map(|(_, r)| r)
            .collect();
        let active: Vec<&&Running> = on_link.iter().filter(|r| !r.parked).collect();
        match (active.as_slice(), on_link.as_slice()) {
            ([one], _) => Ok(one.events.clone()),
            ([], [one]) => Ok(one.events.clone()),
            ([], []) => Err(NoCall::Outside),
            (many, _) if !many.is_empty() => Err(NoCall::Unclear(many.len())),
            (_, all) => Err(NoCall::Unclear(all.len())),
        }
    }
}

/// Why a message from the upstream goes to no call.
enum NoCall {
    /// It names a call that has ended.
    Ended,
    /// No call is in flight on its link.
    Outside,
    /// It names none, and this many are in flight on its link.
    Unclear(usize),
    /// It names none, and a call on its link ended unanswered: it may be
    /// that call's handler's.
    Tainted,
}

impl Registry for Calls {
    fn unregister(&self, serial: u64, id: u64) {
        lock(&self.running).remove(&(serial, id));
    }

    fn answer_wait(&self) -> Duration {
        self.limits.ttl
    }
}

impl InboundSink for Calls {
    fn inbound(&self, link: &Arc<Link>, message: Inbound) {
        match message {
            Inbound::Request {
                id,
                method,
                params,
                related,
            } => {
                if method == "ping" {
                    link.respond(id, Ok(json!({})));
                    return;
                }
                match self.asker(link, related) {
                    Ok(events) => {
                        let ask = CallEvent::Ask { id: id.clone(), method, params };
                        if events.try_send(ask).is_err() {
                            link.respond(
                                id,
                                Err(JsonRpcError::internal("the call is not taking questions")),
                            );
                        }
                    }
                    Err(NoCall::Ended) => link.respond(id, Err(call_ended())),
                    // Outside any call (server-everything asks as soon as
                    // it is initialized): the gateway has no roots.
                    Err(NoCall::Outside) if method == "roots/list" => {
                        link.respond(id, Ok(json!({ "roots": [] })));
                    }
                    Err(NoCall::Outside) => link.respond(
                        id,
                        Err(JsonRpcError::new(
                            crate::jsonrpc::code::METHOD_NOT_FOUND,
                            format!("the gateway answers {method} only during a tool call"),
                        )),
                    ),
                    Err(NoCall::Tainted) => link.respond(
                        id,
                        Err(JsonRpcError::internal(format!(
                            "a call on this connection ended unanswered: the gateway cannot tell \
                             its {method} from another call's, and answers none"
                        ))),
                    ),
                    Err(NoCall::Unclear(n)) => link.respond(
                        id,
                        Err(JsonRpcError::internal(format!(
                            "the gateway cannot tell which of the {n} calls in flight asked {method}: \
                             requests over stdio carry no link to their call"
                        ))),
                    ),
                }
            }
            Inbound::Notification {
                method,
                params,
                related,
            } => {
                if method == "notifications/progress" {
                    let Some(id) = params.get("progressToken").and_then(call_of_token) else {
                        return;
                    };
                    if let Some(r) = lock(&self.running).get(&(link.serial, id)) {
                        // Progress is advisory: dropped when the call lags.
                        let _ = r.events.try_send(CallEvent::Progress(params));
                    }
                } else if method == LOG_MESSAGE {
                    match self.asker(link, related) {
                        Ok(events) => {
                            let _ = events.try_send(CallEvent::Note { method, params });
                        }
                        // Of a call that has ended: its client's alone, so
                        // nobody's now.
                        Err(NoCall::Ended | NoCall::Tainted) => {
                            tracing::debug!("a log message for a call that has ended; dropped");
                        }
                        // Of no call (or of one the gateway cannot tell):
                        // the session's, for the clients that hear those.
                        Err(NoCall::Outside | NoCall::Unclear(_)) => {
                            self.notices.publish(&method, params);
                        }
                    }
                } else if !self.notices.publish(&method, params) {
                    tracing::debug!(%method, "an upstream notification no client can listen to; not forwarded");
                }
            }
        }
    }

    fn link_closed(&self, serial: u64) {
        self.link_over(serial);
    }

    fn tools_changed(&self) {
        self.notices.publish(TOOLS_CHANGED, json!({}));
    }
}

#[cfg(test)]
#[path = "calls_tests.rs"]
mod tests;
