//! `tools/call` of a tool that may become a task: run the handler for the
//! policy's window, answer synchronously (or with plain MRTR) if it ended,
//! otherwise store the task, answer with it and keep the handler running.

use std::future::Future;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::TaskPolicy;
use crate::json::{json_size, write_json, JsonText};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::limits::Limits;
use crate::peer::Peer;
use crate::protocol::InputResponses;
use crate::protocol::TaskStatus;
use crate::runtime::answer::{is_mrtr, HandlerAnswer};
use crate::runtime::detach::run_to_completion;
use crate::runtime::engine::{Engine, InnerService};
use crate::runtime::errors::store_failure;
use crate::runtime::ids::new_task_id;
use crate::runtime::queue::queue_terms_at;
use crate::runtime::registry::{LocalTask, Reservation};
use crate::runtime::runner::{HandlerRun, InnerFuture};
use crate::runtime::status::TaskHandle;
use crate::runtime::watchers::TaskWatch;
use crate::runtime::{transition, wire};
use crate::store::{Era, TaskOutcome, TaskRecord};

/// Deepest nesting of `arguments` or `_meta` a task keeps: its record must
/// read back through `serde_json`, which stops at 128 levels.
const MAX_KEPT_DEPTH: usize = 100;

/// A copy of request JSON that a task may have to store, as text, or
/// `None` if it nests deeper than [`MAX_KEPT_DEPTH`].
///
/// A `String` until a task is made (most `Auto` calls end before): the
/// shared [`JsonText`] costs one more copy.
fn keep(v: &Value) -> Option<String> {
    let mut text = String::with_capacity(256);
    write_json(&mut text, v);
    // Nesting 100 levels takes at least 200 bytes of brackets.
    if text.len() >= 2 * MAX_KEPT_DEPTH && crate::json::depth(v) >= MAX_KEPT_DEPTH {
        return None;
    }
    Some(text)
}

/// A `tools/call`'s `arguments` (`None` when absent) and `_meta`, kept for
/// the task the call may become, and their serialized size (absent
/// `arguments` count as `null`, as before).
pub(crate) struct KeptCall {
    pub(crate) arguments: Option<String>,
    pub(crate) meta: Option<String>,
    pub(crate) size: usize,
}

impl KeptCall {
    /// The copies, or the error for a call a task could not keep: nesting
    /// too deeply, `arguments` that are not an object, answers sent with
    /// the call (`inputResponses`) beyond the answer limits, or more to
    /// store than [`Limits::max_arguments_bytes`] allows (answers and
    /// `requestState` count: the task stores them too).
    pub(crate) fn of(req: &JsonRpcRequest, limits: &Limits) -> Result<Self, JsonRpcError> {
        let mut kept = KeptCall {
            arguments: None,
            meta: None,
            size: 0,
        };
        let Some(params) = req.params_object() else {
            return Ok(kept);
        };
        let too_deep = |what: &str| {
            JsonRpcError::invalid_params(format!(
                "{what} nests deeper than {MAX_KEPT_DEPTH} levels, too deep to keep for a task"
            ))
        };
        kept.size = "null".len();
        if let Some(a) = params.get("arguments") {
            if !a.is_object() {
                return Err(JsonRpcError::invalid_params(
                    "\"arguments\" must be an object",
                ));
            }
            let text = keep(a).ok_or_else(|| too_deep("arguments"))?;
            kept.size = text.len();
            kept.arguments = Some(text);
        }
        if let Some(m) = params.get("_meta") {
            let text = keep(m).ok_or_else(|| too_deep("_meta"))?;
            kept.size += text.len();
            kept.meta = Some(text);
        }
        match params.get("inputResponses") {
            None | Some(Value::Null) => {}
            Some(Value::Object(answers)) => {
                limits.check_answers(answers)?;
                kept.size += answers
                    .iter()
                    .map(|(k, v)| k.len() + json_size(v))
                    .sum::<usize>();
            }
            Some(_) => {
                return Err(JsonRpcError::invalid_params(
                    "\"inputResponses\" must be an object",
                ))
            }
        }
        if let Some(Value::String(state)) = params.get("requestState") {
            kept.size += state.len();
        }
        limits.check_arguments(kept.size)?;
        Ok(kept)
    }
}

/// What the layer remembers of the `tools/call` that may become a task.
pub(crate) struct TaskCandidate {
    pub(crate) id: Option<RequestId>,
    pub(crate) name: String,
    /// `arguments` and `_meta`, read back only if a task is made.
    pub(crate) kept: KeptCall,
    pub(crate) input_responses: InputResponses,
    pub(crate) request_state: Option<String>,
    pub(crate) owner: Option<String>,
    pub(crate) token: CancellationToken,
    pub(crate) era: Era,
    pub(crate) requested_ttl: Option<u64>,
    pub(crate) peer: Option<Peer>,
    /// The handle the first run is given: bound to the task once written.
    pub(crate) handle: TaskHandle,
    /// The owner's slot this call holds until it ends or becomes a task.
    pub(crate) reservation: Reservation,
}

impl TaskCandidate {
    pub(crate) fn from_request(
        req: &JsonRpcRequest,
        kept: KeptCall,
        owner: Option<String>,
        era: Era,
        reservation: Reservation,
    ) -> Self {
        let token = CancellationToken::new();
        let mut call = TaskCandidate {
            handle: TaskHandle::unbound(token.clone()),
            id: req.id.clone(),
            name: String::new(),
            kept,
            input_responses: InputResponses::new(),
            request_state: None,
            owner,
            token,
            era,
            requested_ttl: None,
            peer: req.extensions.get::<Peer>().cloned(),
            reservation,
        };
        // One pass over the parameters rather than a lookup per key.
        for (key, value) in req.params_object().into_iter().flatten() {
            match key.as_str() {
                "name" => call.name = value.as_str().unwrap_or_default().to_owned(),
                "inputResponses" => {
                    if let Some(m) = value.as_object() {
                        call.input_responses =
                            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    }
                }
                "requestState" => call.request_state = value.as_str().map(str::to_owned),
                "task" => call.requested_ttl = value.get("ttl").and_then(Value::as_u64),
                _ => {}
            }
        }
        call
    }
}

impl Engine {
    /// Refuse a `tools/call` that may become a task when the layer requires
    /// an identity and the caller has none
    /// ([`TaskLayer::with_identity_required`](crate::TaskLayer::with_identity_required)).
    pub(crate) fn check_identity(&self, owner: Option<&str>) -> Result<(), JsonRpcError> {
        if self.cfg.identity_required && owner.is_none() {
            return Err(JsonRpcError::invalid_request(
                "a task needs an identified caller",
            ));
        }
        Ok(())
    }

    /// Run a `tools/call` that may become a task: wait up to the policy's
    /// window for the handler, answer synchronously (or with plain MRTR) if
    /// it finished, otherwise store a task and keep the handler running.
    pub(crate) async fn tools_call<S, F>(
        self: Arc<Self>,
        svc: S,
        call: TaskCandidate,
        policy: TaskPolicy,
        fut: F,
    ) -> Result<JsonRpcResponse, S::Error>
    where
        S: InnerService,
        F: Future<Output = Result<JsonRpcResponse, S::Error>> + Send + 'static,
    {
        let window = match policy {
            TaskPolicy::Auto { within } => within,
            _ => self.cfg.task_window,
        };
        let mut fut: InnerFuture<S::Error> = Box::pin(fut);
        // A 2025-11-25 client asked for a task itself: it gets one at once.
        let fut = if call.era == Era::Legacy {
            fut
        } else {
            // A zero window polls the handler once: tokio would round a
            // zero timeout up to its next 1 ms timer tick.
            let first = if window.is_zero() {
                std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(match fut.as_mut().poll(cx) {
                        std::task::Poll::Ready(out) => Ok(out),
                        std::task::Poll::Pending => Err(()),
                    })
                })
                .await
            } else {
                // The handler may ask for its task before the window ends
                // (`TaskHandle::start_task_now`); checked first, so that an
                // answer it returns right after belongs to the task.
                let handle = call.handle.clone();
                tokio::select! {
                    biased;
                    () = handle.promoted() => Err(()),
                    out = tokio::time::timeout(window, &mut fut) => out.map_err(drop),
                }
            };
            // Asked for a task and answered at once: the answer is the
            // task's first.
            let first = match first {
                Ok(out) if call.handle.is_promoted() => {
                    fut = Box::pin(std::future::ready(out));
                    Err(())
                }
                other => other,
            };
            match first {
                Ok(Err(e)) => return Err(e),
                Ok(Ok(resp)) if is_mrtr(&resp) || matches!(policy, TaskPolicy::Auto { .. }) => {
                    return Ok(resp)
                }
                // A `Task` tool that has answered already: its task is
                // written once, finished.
                Ok(Ok(resp)) => {
                    return run_to_completion(Box::pin(self.create_finished(Box::new(call), resp)))
                        .await
                }
                Err(()) => fut,
            }
        };
        // Boxed, the call too: the window above is all most `Auto` calls
        // need (BENCHMARKS.md: futures of 1 KB and more).
        // Run to completion: once the task is written, its runner must start
        // even if the caller has gone.
        run_to_completion(Box::pin(self.create_task(svc, Box::new(call), fut))).await
    }

    /// The record of a new task for `call`, `working` at version 1, or the
    /// error to answer if no id could be made.
    fn new_record(&self, call: &mut TaskCandidate) -> Result<TaskRecord, JsonRpcError> {
        let task_id = match new_task_id() {
            Ok(id) => id,
            Err(e) => {
                call.token.cancel();
                warn!(error = %e, "the OS random source failed; no task created");
                return Err(JsonRpcError::internal("cannot create a task id"));
            }
        };
        let now = self.now_ms();
        let mut record = TaskRecord::new(
            task_id,
            call.era,
            std::mem::take(&mut call.name),
            Value::Null,
            now,
            self.cfg.ttl_ms(call.requested_ttl),
        )
        .with_owner(call.owner.take());
        // Absent arguments are kept as `{}`.
        record.arguments = Some(
            call.kept
                .arguments
                .take()
                .map_or_else(|| JsonText::from_value(&json!({})), JsonText::from_written),
        );
        record.poll_interval_ms =
            Some(u64::try_from(self.cfg.poll_interval.as_millis()).unwrap_or(u64::MAX));
        record.meta = call.kept.meta.take().map(JsonText::from_written);
        // Answers given before the task existed seed the task's answers, so a
        // handler resumed from the top finds them again.
        record.input_responses = std::mem::take(&mut call.input_responses);
        record.request_state = call.request_state.take();
        // The policy travels with the task: whichever replica recovers it
        // applies this one (`Engine::recovery_of`).
        record.recovery = Some(self.cfg.recovery);
        Ok(record)
    }

    /// The task of a `tools/call` whose handler answered on its first poll
    /// (2026-07-28): written once, already finished, instead of `working`
    /// and then finished. Answered and announced as if it had been written
    /// twice: the answer shows the task `working`, and event listeners see
    /// `working` then the end.
    async fn create_finished<E>(
        self: Arc<Self>,
        mut call: Box<TaskCandidate>,
        resp: JsonRpcResponse,
    ) -> Result<JsonRpcResponse, E> {
        let working = match self.new_record(&mut call) {
            Ok(record) => record,
            Err(e) => return Ok(JsonRpcResponse::error(call.id, e)),
        };
        let answer =
            HandlerAnswer::from_output::<E>(Ok(resp)).bounded(self.cfg.limits.max_result_bytes);
        let done = transition::finished_at_once(&working, answer);
        let local = LocalTask::new(&working, call.token.clone(), None);
        let done = Arc::new(done);
        if let Err(e) = self.store.create_shared(Arc::clone(&done)).await {
            return Ok(JsonRpcResponse::error(call.id, store_failure(&e)));
        }
        info!(parent: &local.span, status = %working.status, "task created");
        self.announce(&working);
        let created = wire::create_result(&working);
        crate::metrics::created(working.era);
        // Finished already: its owner's slot is given back (`call` drops).
        self.publish(working.status, &done, Some(&local));
        Ok(JsonRpcResponse::trusted_text(call.id, created))
    }

    /// Store the task of a `tools/call` whose handler is running (or has
    /// answered, for a `Task` tool), answer with it, and run the handler.
    async fn create_task<S>(
        self: Arc<Self>,
        svc: S,
        call: Box<TaskCandidate>,
        fut: InnerFuture<S::Error>,
    ) -> Result<JsonRpcResponse, S::Error>
    where
        S: InnerService,
    {
        let mut call = call;
        let mut record = match self.new_record(&mut call) {
            Ok(record) => record,
            Err(e) => return Ok(JsonRpcResponse::error(call.id, e)),
        };
        record.lease = Some(self.new_lease(None));
        // A message the handler set before the task existed is written
        // with it.
        record.status_message = call.handle.take_pending();
        let (record, local) = match self.write_new_task(&mut call, record, "task created").await {
            Ok(written) => written,
            Err(e) => {
                // Dropping the handler's future stops it.
                call.token.cancel();
                return Ok(JsonRpcResponse::error(call.id, e));
            }
        };
        let created = wire::create_result(&record);
        let fence = record.lease.as_ref().map_or(0, |l| l.fence);
        call.handle.bind(&self.me, &record.id, fence);
        let run = HandlerRun::fenced(fence);
        Box::pin(self.drive(svc, record.id.clone(), local, fut, run, record.era)).await;
        Ok(JsonRpcResponse::trusted_text(call.id, created))
    }
}

impl Engine {
    /// A `tools/call` that becomes a task with queued execution: written
    /// runnable for a worker, no handler run here. An `Auto` call waits up
    /// to its window for a worker to finish the task and is then answered
    /// synchronously with its result.
    pub(crate) async fn queue_call<E>(
        self: Arc<Self>,
        mut call: TaskCandidate,
        policy: TaskPolicy,
    ) -> Result<JsonRpcResponse, E> {
        // The window runs from the call, not from the end of its write: a
        // replica that stalls after the write must not lengthen it.
        let started = tokio::time::Instant::now();
        let mut record = match self.new_record(&mut call) {
            Ok(record) => record,
            Err(e) => return Ok(JsonRpcResponse::error(call.id, e)),
        };
        record.lease = Some(queue_terms_at(record.created_at_ms).take_over(None));
        // Watched before the write: a worker may finish the task before
        // this call reads it again.
        let within = match policy {
            TaskPolicy::Auto { within } if call.era != Era::Legacy => Some(within),
            _ => None,
        };
        let mut watch = within.map(|_| self.hub.watchers.watch(&record.id));
        let record = match self
            .write_new_task(&mut call, record, "task created, queued")
            .await
        {
            Ok((record, _)) => record,
            Err(e) => return Ok(JsonRpcResponse::error(call.id, e)),
        };
        self.wake_workers();
        if let (Some(within), Some(watch)) = (within, watch.as_mut()) {
            if let Some(resp) = self
                .finished_by(&record.id, &call.id, started + within, watch)
                .await
            {
                return Ok(resp);
            }
        }
        Ok(JsonRpcResponse::trusted_text(
            call.id,
            wire::create_result(&record),
        ))
    }

    /// Write `record`, the new task of `call`, and track it here (its entry
    /// takes the call's slot of the owner's bound): what creating a task
    /// running here and creating one queued share. Nothing is tracked if
    /// the write fails.
    async fn write_new_task(
        &self,
        call: &mut TaskCandidate,
        record: TaskRecord,
        what: &'static str,
    ) -> Result<(Arc<TaskRecord>, LocalTask), JsonRpcError> {
        let record = Arc::new(record);
        if let Err(e) = self.store.create_shared(Arc::clone(&record)).await {
            return Err(store_failure(&e));
        }
        let local = LocalTask::new(&record, call.token.clone(), call.peer.take());
        info!(parent: &local.span, status = %record.status, "{what}");
        call.reservation.commit(&record.id, local.clone());
        self.announce(&record);
        crate::metrics::created(record.era);
        Ok((record, local))
    }

    /// The answer of a task that ends by `until`, as a synchronous
    /// call would have had it; `None` if it does not.
    async fn finished_by(
        &self,
        id: &str,
        call_id: &Option<RequestId>,
        until: tokio::time::Instant,
        watch: &mut TaskWatch,
    ) -> Option<JsonRpcResponse> {
        loop {
            let found = self.store.get(id, self.now_ms()).await;
            if tokio::time::Instant::now() >= until {
                // A read that ends past the window (a busy store) answers
                // with the task, as a handler ending late would.
                return None;
            }
            if let Ok(Some(record)) = crate::store::opened_found(found) {
                match (record.status, &record.outcome) {
                    (TaskStatus::Completed | TaskStatus::Failed, Some(TaskOutcome::Result(r))) => {
                        return Some(JsonRpcResponse::trusted_text(
                            call_id.clone(),
                            r.get().to_owned(),
                        ));
                    }
                    (TaskStatus::Failed, Some(TaskOutcome::Error(e))) => {
                        return Some(JsonRpcResponse::error(call_id.clone(), e.clone()));
                    }
                    _ => {}
                }
            }
            // Without a change feed, a worker in another process is seen
            // only by reading again; with one, its writes wake the watch.
            let resync = async {
                match self.resync_period() {
                    Some(_) => tokio::time::sleep(RESYNC_WITHIN).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = watch.changed() => {}
                () = resync => {}
                () = tokio::time::sleep_until(until) => return None,
            }
        }
    }
}

/// How often an `Auto` call of a queued task re-reads it while it waits,
/// when the store reports no changes.
const RESYNC_WITHIN: std::time::Duration = std::time::Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_call_json_reads_back_unchanged() {
        let mut deep = json!({"leaf": [1.5, -0.0, 18_446_744_073_709_551_615u64]});
        for _ in 0..150 {
            deep = json!({ "d": [deep] });
        }
        let values = [
            json!({"text": "h\u{e9}llo \"q\" \n\u{1}", "n": -12, "f": 0.1, "big": 1e300}),
            json!(null),
            json!([]),
        ];
        for v in values {
            let kept = keep(&v).unwrap();
            assert_eq!(kept.len(), crate::json::json_size(&v));
            assert_eq!(JsonText::from_written(kept).to_value(), v);
        }
        // Too deep to read back from a durable store: refused.
        assert!(keep(&deep).is_none());
    }
}
