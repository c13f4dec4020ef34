//! Where one run of a call reports what the upstream says along the way:
//! progress becomes the task's `statusMessage` (and the client's own
//! progress notifications when it asked for them), other notifications go
//! to the client's stream, and a 2025-11-25 client outside a task answers
//! questions on its own stream.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::jsonrpc::{code, JsonRpcError};
use crate::peer::Peer;
use crate::runtime::TaskHandle;

/// What one run of a call reports to.
#[derive(Default)]
pub(crate) struct RunSink {
    /// The task's handle, when the call is or may become a task.
    pub(crate) handle: Option<TaskHandle>,
    /// The client's stream, when its transport has one.
    pub(crate) peer: Option<Peer>,
    /// The client's own `progressToken`, if it sent one.
    pub(crate) client_token: Option<Value>,
    /// Questions go to the client's stream as requests (a 2025-11-25 call
    /// that is no task) instead of becoming input requests.
    pub(crate) relay: bool,
    /// The client's declared capabilities: a 2026-07-28 client's from its
    /// request, a 2025-11-25 client's from its `initialize` where the
    /// transport keeps them (`ClientPeer::declared_capabilities`: stdio);
    /// `None` where nobody knows them (a 2025 client over HTTP).
    pub(crate) caps: Option<Value>,
    /// The notifications on their way to the client's stream, in order,
    /// by one task: made at the first.
    pub(crate) outbox: OnceLock<mpsc::Sender<Outgoing>>,
}

/// What the outbox's task does next.
pub(crate) enum Outgoing {
    /// Send this notification.
    Notify(String, Value),
    /// Say when everything before it was sent.
    Flushed(oneshot::Sender<()>),
}

/// How long a call's answer waits for the notifications before it to reach
/// a client that lags.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

/// Notifications of one run waiting for a client that lags; past it they
/// are dropped (progress and log messages are advisory).
const OUTBOX: usize = 64;

impl RunSink {
    /// The peer to ask questions on, when questions are relayed.
    pub(crate) fn relay(&self) -> Option<&Peer> {
        self.peer.as_ref().filter(|_| self.relay)
    }

    /// The upstream's answer to a question the client cannot take, as a
    /// client without that capability would answer: no roots for
    /// `roots/list`, `-32601` for the rest. `None` when the client can.
    pub(crate) fn refusal(&self, method: &str) -> Option<Result<Value, JsonRpcError>> {
        let caps = self.caps.as_ref()?;
        let needs = match method {
            "elicitation/create" => "elicitation",
            "sampling/createMessage" => "sampling",
            "roots/list" => "roots",
            _ => return None,
        };
        if caps.get(needs).is_some_and(|c| !c.is_null()) {
            return None;
        }
        Some(match method {
            "roots/list" => Ok(json!({ "roots": [] })),
            _ => Err(JsonRpcError::new(
                code::METHOD_NOT_FOUND,
                format!("the client did not declare the {needs} capability"),
            )),
        })
    }

    /// Whether the call's progress has somewhere to go: its task's status
    /// message, or the client's own `progressToken`. A synchronous call
    /// of a client that asked for none gets no token upstream.
    pub(crate) fn takes_progress(&self) -> bool {
        self.handle.is_some() || (self.peer.is_some() && self.client_token.is_some())
    }

    /// A `notifications/progress` of the upstream for this call.
    pub(crate) fn progress(&self, params: &Value) {
        if let Some(handle) = &self.handle {
            handle.set_status_message(status_message(params));
        }
        if let (Some(peer), Some(token)) = (&self.peer, &self.client_token) {
            let mut params = params.clone();
            params["progressToken"] = token.clone();
            self.forward(peer, "notifications/progress".into(), params);
        }
    }

    /// Another notification of the upstream for this call (a log message).
    pub(crate) fn note(&self, method: String, params: Value) {
        if let Some(peer) = &self.peer {
            self.forward(peer, method, params);
        }
    }

    /// Queue a notification for the client: one task sends them in order,
    /// at most [`OUTBOX`] wait, and the rest are dropped while the client
    /// does not read (a task each made memory and tasks grow without
    /// bound under an upstream that reports fast).
    fn forward(&self, peer: &Peer, method: String, params: Value) {
        let outbox = self.outbox.get_or_init(|| {
            let (tx, mut rx) = mpsc::channel::<Outgoing>(OUTBOX);
            let peer = peer.clone();
            tokio::spawn(async move {
                while let Some(next) = rx.recv().await {
                    match next {
                        Outgoing::Notify(method, params) => peer.notify(method, params).await,
                        Outgoing::Flushed(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
            tx
        });
        if outbox.try_send(Outgoing::Notify(method, params)).is_err() {
            tracing::debug!("the client lags: a notification of the upstream dropped");
        }
    }

    /// Wait until the notifications forwarded so far reached the client's
    /// stream, at most [`FLUSH_WAIT`]: the call's answer follows them,
    /// and may end that stream.
    pub(crate) async fn flushed(&self) {
        let Some(outbox) = self.outbox.get() else {
            return;
        };
        let (done, sent) = oneshot::channel();
        let _ = tokio::time::timeout(FLUSH_WAIT, async {
            if outbox.send(Outgoing::Flushed(done)).await.is_ok() {
                let _ = sent.await;
            }
        })
        .await;
    }
}

/// A progress notification as a status message: its `message`, else
/// "k of n", else "k".
pub(crate) fn status_message(params: &Value) -> String {
    if let Some(message) = params.get("message").and_then(Value::as_str) {
        if !message.is_empty() {
            return message.to_owned();
        }
    }
    let number = |v: &Value| match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => v.to_string(),
    };
    match (params.get("progress"), params.get("total")) {
        (Some(p), Some(t)) if !t.is_null() => format!("{} of {}", number(p), number(t)),
        (Some(p), _) => number(p),
        _ => json!(params).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_a_status_message() {
        assert_eq!(
            status_message(&json!({"progress": 2, "total": 5})),
            "2 of 5"
        );
        assert_eq!(status_message(&json!({"progress": 2.5})), "2.5");
        assert_eq!(
            status_message(&json!({"progress": 1, "total": 4, "message": "step 1"})),
            "step 1"
        );
    }
}
