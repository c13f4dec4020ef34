//! One call to the upstream, driven a step at a time: until it answers, or
//! until it asks the client something (then the call waits, parked, for the
//! answers and goes on with the same upstream request).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::events::{CallEvent, Registry};
use super::sink::RunSink;
use crate::jsonrpc::JsonRpcError;
use crate::upstream::link::{Answer, Link};
use crate::upstream::Lease;

/// After the upstream's first question, how long to wait for more before
/// handing them to the client together (an upstream asking two questions
/// at once sends them back to back).
const SETTLE: Duration = Duration::from_millis(30);

type Pending = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// What a step of a call ended with.
pub(crate) enum Step {
    /// The upstream answered: its result (as it wrote it) or its error.
    Done(Answer),
    /// The upstream asks: `{key: {method, params}}` for the client.
    Asked(Map<String, Value>),
}

/// A request to the upstream in flight, with the questions it asked that
/// wait for answers.
pub(crate) struct UpstreamCall {
    calls: Arc<dyn Registry>,
    link: Arc<Link>,
    id: u64,
    answer: Pending,
    events: mpsc::Receiver<CallEvent>,
    /// Questions asked and not answered: key, the upstream's request id,
    /// and the question as the client sees it.
    asked: Vec<(String, Value, Value)>,
    next_key: u64,
    done: bool,
    /// The stdio lane this call holds while it lives (parked too): its
    /// questions are its own.
    lease: Option<Lease>,
}

impl UpstreamCall {
    /// Send `message` (request `id`, with the gateway's `progressToken`
    /// for it in its `_meta`) on `link`; what the upstream sends for it
    /// arrives on `events`, and `calls` is told when it ends.
    pub(crate) fn start(
        calls: Arc<dyn Registry>,
        events: mpsc::Receiver<CallEvent>,
        link: &Arc<Link>,
        lease: Option<Lease>,
        id: u64,
        message: String,
    ) -> Self {
        let sender = Arc::clone(link);
        let answer = Box::pin(async move { sender.request_text(id, message).await });
        UpstreamCall {
            calls,
            link: Arc::clone(link),
            id,
            answer,
            events,
            asked: Vec::new(),
            next_key: 0,
            done: false,
            lease,
        }
    }

    /// The call waits for answers: its stdio lane may carry another call.
    pub(crate) fn park_lane(&mut self) {
        if let Some(lease) = &mut self.lease {
            lease.park();
        }
    }

    /// The call goes on: once its lane carries no other active call.
    pub(crate) async fn resume_lane(&mut self) {
        if let Some(lease) = &mut self.lease {
            lease.resume().await;
        }
    }

    /// The upstream request id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Which connection the call runs on.
    pub(crate) fn serial(&self) -> u64 {
        self.link.serial
    }

    /// Whether that connection is over.
    pub(crate) fn link_closed(&self) -> bool {
        self.link.is_closed()
    }

    /// Run until the upstream answers, asks, or `cancel` fires (then the
    /// upstream is told and the step is an error).
    pub(crate) async fn step(
        &mut self,
        sink: &RunSink,
        cancel: Option<&CancellationToken>,
    ) -> Step {
        let cancelled = async {
            match cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(cancelled);
        loop {
            // The answer first (one that came with a cancel ends the call
            // either way), then the cancel, which an upstream sending
            // events without end cannot keep out.
            let event = tokio::select! {
                biased;
                out = &mut self.answer => {
                    self.answered(sink).await;
                    return Step::Done(out);
                }
                () = &mut cancelled => {
                    self.cancel_upstream("the task was cancelled");
                    return Step::Done(Err(JsonRpcError::internal("the call was cancelled")));
                }
                event = self.events.recv() => event,
            };
            match event {
                Some(CallEvent::Ask { id, method, params }) => {
                    if let Some(answer) = sink.refusal(&method) {
                        self.link.respond(id, answer);
                        continue;
                    }
                    if let Some(peer) = sink.relay() {
                        // A 2025-11-25 client on a call that is no task:
                        // asked on its own stream, as any proxy does. The
                        // call's own answer ends the wait: an upstream may
                        // ask and answer without waiting for the reply
                        // (server-everything's `roots/list`), and a client
                        // that does not answer must not hold the call (nor
                        // its upstream process) longer than a parked call
                        // waits.
                        let wait = self.calls.answer_wait();
                        let answer = tokio::select! {
                            biased;
                            out = &mut self.answer => {
                                self.refuse_ended(id);
                                self.answered(sink).await;
                                return Step::Done(out);
                            }
                            a = peer.request(method, params) => a,
                            () = &mut cancelled => Err(JsonRpcError::internal("the call was cancelled")),
                            () = tokio::time::sleep(wait) => Err(JsonRpcError::internal(format!(
                                "the client did not answer within {} s", wait.as_secs()
                            ))),
                        };
                        self.link.respond(id, answer);
                        continue;
                    }
                    self.ask(id, method, params);
                    self.settle(sink).await;
                    return Step::Asked(self.questions());
                }
                Some(CallEvent::Progress(params)) => sink.progress(&params),
                Some(CallEvent::Note { method, params }) => sink.note(method, params),
                None => {
                    // The table let go of the call (its link is over): the
                    // answer fails next.
                    let out = (&mut self.answer).await;
                    self.answered(sink).await;
                    return Step::Done(out);
                }
            }
        }
    }

    /// Questions that come right after the first join it.
    async fn settle(&mut self, sink: &RunSink) {
        let deadline = tokio::time::Instant::now() + SETTLE;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.events.recv()).await {
            match event {
                CallEvent::Ask { id, method, params } => match sink.refusal(&method) {
                    Some(answer) => self.link.respond(id, answer),
                    None => self.ask(id, method, params),
                },
                CallEvent::Progress(params) => sink.progress(&params),
                CallEvent::Note { method, params } => sink.note(method, params),
            }
        }
    }

    fn ask(&mut self, id: Value, method: String, params: Value) {
        self.next_key += 1;
        let short = method.split('/').next().unwrap_or("input");
        let key = format!("{short}-{}", self.next_key);
        self.asked
            .push((key, id, json!({ "method": method, "params": params })));
    }

    /// The questions not answered yet, keyed for the client.
    pub(crate) fn questions(&self) -> Map<String, Value> {
        self.asked
            .iter()
            .map(|(key, _, q)| (key.clone(), q.clone()))
            .collect()
    }

    /// Hand the client's answers to the upstream's questions; answers to
    /// other keys (earlier rounds) are ignored. Returns whether questions
    /// remain unanswered.
    pub(crate) fn answer(&mut self, answers: Option<&Map<String, Value>>) -> bool {
        let link = &self.link;
        self.asked
            .retain(|(key, id, _)| match answers.and_then(|a| a.get(key)) {
                Some(answer) => {
                    link.respond(id.clone(), Ok(answer.clone()));
                    false
                }
                None => true,
            });
        !self.asked.is_empty()
    }

    /// Refuse every question not answered: nobody can answer them.
    pub(crate) fn refuse_questions(&mut self) {
        for (_, id, q) in self.asked.drain(..) {
            let method = q.get("method").and_then(Value::as_str).unwrap_or_default();
            self.link.respond(
                id,
                Err(JsonRpcError::new(
                    crate::jsonrpc::code::METHOD_NOT_FOUND,
                    format!("the gateway's client cannot answer {method} here"),
                )),
            );
        }
    }

    /// Tell the upstream to stop, and stop waiting.
    pub(crate) fn cancel_upstream(&mut self, reason: &str) {
        if !self.done {
            self.done = true;
            if let Some(lease) = &mut self.lease {
                lease.unanswered();
            }
            self.link.notify(
                "notifications/cancelled",
                json!({ "requestId": self.id, "reason": reason }),
            );
            self.link.forget(self.id);
            self.calls.unregister(self.link.serial, self.id);
            self.refuse_leftovers();
        }
    }

    /// The upstream answered: what it said before its answer (read after
    /// it, as the answer is waited for first) still reaches the task and
    /// the client, ahead of the answer; questions are refused.
    async fn answered(&mut self, sink: &RunSink) {
        self.done = true;
        self.calls.unregister(self.link.serial, self.id);
        self.drain_leftovers(Some(sink));
        sink.flushed().await;
    }

    /// [`drain_leftovers`](Self::drain_leftovers) of a call that ended
    /// without its answer: its progress and notes go nowhere.
    fn refuse_leftovers(&mut self) {
        self.drain_leftovers(None);
    }

    /// What was routed to the call and it never took (what came with its
    /// answer, read after it): each question is answered, with an error
    /// (the upstream waits for it); progress and notes go to `sink` if
    /// there is one. Nothing reaches the call once it is unregistered (a
    /// question then gets the table's own answer).
    fn drain_leftovers(&mut self, sink: Option<&RunSink>) {
        while let Ok(event) = self.events.try_recv() {
            match (event, sink) {
                (CallEvent::Ask { id, .. }, _) => self.refuse_ended(id),
                (CallEvent::Progress(params), Some(sink)) => sink.progress(&params),
                (CallEvent::Note { method, params }, Some(sink)) => sink.note(method, params),
                (CallEvent::Progress(_) | CallEvent::Note { .. }, None) => {}
            }
        }
    }

    /// Answer the upstream's question `id`: its call has ended.
    fn refuse_ended(&self, id: Value) {
        self.link.respond(id, Err(call_ended()));
    }
}

/// The answer to an upstream question whose call has ended.
pub(super) fn call_ended() -> JsonRpcError {
    JsonRpcError::internal("the call this was asked for has ended")
}

impl Drop for UpstreamCall {
    fn drop(&mut self) {
        // Dropped unanswered: its caller left (a client gone, an expired
        // wait for answers, a cancelled task).
        self.cancel_upstream("the gateway's caller went away");
    }
}
