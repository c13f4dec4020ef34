//! [`TaskHandle`]: what a running handler knows of its task (its id, its
//! cancellation) and the one thing it may say about it while it runs, its
//! `statusMessage`.
//!
//! A handler's [`set_status_message`](TaskHandle::set_status_message) only
//! puts the message in a slot and returns. A writer task (one per run, alive
//! only while it has something to write) takes the latest message from the
//! slot and writes it through the compare-and-set loop under the run's lease
//! fence, then waits [`STATUS_FLUSH_PERIOD`] before it writes again:
//! messages set meanwhile are coalesced, the last one wins. A run whose fence
//! is stale or whose task left `working` writes nothing, and its handle goes
//! quiet for good.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tracing::warn;

use super::cas::{CasError, Decision, Outcome, Reader};
use super::engine::Engine;
use super::transition;

/// The shortest time between two status message writes of one run: a
/// handler setting messages in a tight loop costs at most this many store
/// writes a second (plus one).
pub(crate) const STATUS_FLUSH_PERIOD: Duration = Duration::from_millis(250);

/// The longest status message kept, in bytes; a longer one is cut at a
/// character boundary.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// A running task's handle, in the request extensions of every run of a
/// task's handler: its first run (the `tools/call` that may become a task)
/// and every re-invocation (a resume after input, a `requestState` round, a
/// re-run after orphan recovery).
///
/// A `tools/call` that cannot become a task (its tool's policy is
/// [`TaskPolicy::Sync`](crate::TaskPolicy::Sync), or the client cannot take
/// a task) gets no handle: `req.extensions.get::<TaskHandle>()` is `None`.
///
/// ```
/// use mcp_task_layer::{JsonRpcRequest, TaskHandle};
///
/// async fn handler(req: JsonRpcRequest) {
///     let Some(task) = req.extensions.get::<TaskHandle>().cloned() else {
///         return; // not a task
///     };
///     for step in 1..=3 {
///         if task.is_cancelled() {
///             return;
///         }
///         task.set_status_message(format!("step {step} of 3"));
///         // ... the work of one step ...
///     }
/// }
/// # let _ = handler;
/// ```
#[derive(Clone)]
pub struct TaskHandle {
    shared: Arc<Shared>,
}

struct Shared {
    token: CancellationToken,
    /// Woken by [`TaskHandle::start_task_now`].
    promote: Notify,
    /// Set when the task exists: at once for a re-invocation, when the task
    /// is written for a first run.
    id: OnceLock<String>,
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    /// Where messages go, once the task exists.
    run: Option<Run>,
    /// The latest message not yet written.
    pending: Option<String>,
    /// The handler asked for the task before its window ended
    /// ([`TaskHandle::start_task_now`]).
    promoted: bool,
    /// Whether a writer task is alive for this run.
    writing: bool,
    /// The run is over here (stale fence, task no longer `working`, layer
    /// gone): messages are dropped.
    closed: bool,
}

#[derive(Clone)]
struct Run {
    engine: Weak<Engine>,
    id: String,
    fence: u64,
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The message is the handler's; it is not printed.
        f.debug_struct("TaskHandle")
            .field("id", &self.id())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl TaskHandle {
    /// The id of the task, or `None` while the first run of a call has not
    /// become a task yet (the call may still answer synchronously, within
    /// its policy's window). Always set in a re-invocation.
    pub fn id(&self) -> Option<&str> {
        self.shared.id.get().map(String::as_str)
    }

    /// Whether the task was cancelled (by its client, by expiry, or because
    /// another replica took it over): the handler should stop soon, its
    /// answer will not be written.
    pub fn is_cancelled(&self) -> bool {
        self.shared.token.is_cancelled()
    }

    /// Completes when the task is cancelled; see
    /// [`is_cancelled`](Self::is_cancelled).
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.shared.token.cancelled()
    }

    /// Set the task's `statusMessage`, shown by `tasks/get`, pushed to
    /// `subscriptions/listen` subscribers and (2025-11-25) sent as
    /// `notifications/tasks/status`.
    ///
    /// Returns at once and never fails: the message is written in the
    /// background, at most about four times a second (a message set
    /// meanwhile replaces the one not yet written; the last one is always
    /// written while the task is still `working`). A message longer than
    /// [`MAX_STATUS_MESSAGE_BYTES`] is cut. Set before the call has become
    /// a task, it is written with the task; if the call answers
    /// synchronously it is dropped. The layer's own messages win: a message
    /// arriving after the task has left `working` (waiting for input,
    /// finished, cancelled) or after this run lost its lease is dropped,
    /// and the layer's message on each state change replaces the handler's
    /// (a resumed run starts with none).
    ///
    /// With sealing at rest (feature `seal`) the message is sealed like the
    /// arguments; without, it is stored in clear like the rest of the
    /// record.
    pub fn set_status_message(&self, message: impl Into<String>) {
        let mut message = message.into();
        truncate(&mut message, MAX_STATUS_MESSAGE_BYTES);
        let mut slot = self.shared.lock();
        if slot.closed {
            return;
        }
        slot.pending = Some(message);
        self.start_writer(&mut slot);
    }

    /// Make this call a task now, instead of at the end of its policy's
    /// window: the handler's answer, even an MRTR `input_required` result
    /// it returns right after, then belongs to the task (its first round of
    /// `inputRequests`) instead of going back to the client as a plain
    /// result. A proxy whose upstream asks a question early uses it, so a
    /// client that can take a task answers through `tasks/update`.
    ///
    /// No effect once the call is a task ([`id`](Self::id) is set), nor in
    /// a 2025-11-25 call (a task from the start).
    pub fn start_task_now(&self) {
        let mut slot = self.shared.lock();
        if !slot.promoted {
            slot.promoted = true;
            drop(slot);
            self.shared.promote.notify_waiters();
        }
    }

    /// Completes once [`start_task_now`](Self::start_task_now) was called.
    pub(crate) async fn promoted(&self) {
        loop {
            let woken = self.shared.promote.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.shared.lock().promoted {
                return;
            }
            woken.await;
        }
    }

    /// Whether [`start_task_now`](Self::start_task_now) was called.
    pub(crate) fn is_promoted(&self) -> bool {
        self.shared.lock().promoted
    }

    /// A handle for the first run of a call that may become a task.
    pub(crate) fn unbound(token: CancellationToken) -> Self {
        TaskHandle {
            shared: Arc::new(Shared {
                token,
                promote: Notify::new(),
                id: OnceLock::new(),
                slot: Mutex::new(Slot::default()),
            }),
        }
    }

    /// A handle for a run of task `id` under lease `fence`.
    pub(crate) fn bound(
        engine: &Weak<Engine>,
        id: &str,
        fence: u64,
        token: CancellationToken,
    ) -> Self {
        let handle = TaskHandle::unbound(token);
        handle.bind(engine, id, fence);
        handle
    }

    /// The message set before the task existed, to be written with it.
    pub(crate) fn take_pending(&self) -> Option<String> {
        self.shared.lock().pending.take()
    }

    /// The task now exists as `id`, run under `fence`: messages set from now
    /// on (and any set since [`take_pending`](Self::take_pending)) are
    /// written to it.
    pub(crate) fn bind(&self, engine: &Weak<Engine>, id: &str, fence: u64) {
        let _ = self.shared.id.set(id.to_owned());
        let mut slot = self.shared.lock();
        slot.run = Some(Run {
            engine: Weak::clone(engine),
            id: id.to_owned(),
            fence,
        });
        if slot.pending.is_some() {
            self.start_writer(&mut slot);
        }
    }

    /// Spawn the run's writer unless one is alive or the task does not
    /// exist yet.
    fn start_writer(&self, slot: &mut Slot) {
        if slot.writing {
            return;
        }
        let Some(run) = slot.run.clone() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        slot.writing = true;
        rt.spawn(write_messages(Arc::clone(&self.shared), run));
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Cut `s` to at most `max` bytes, at a character boundary.
fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// The writer of one run: the latest pending message, then a pause, until
/// nothing is pending or the run is over.
async fn write_messages(shared: Arc<Shared>, run: Run) {
    loop {
        let message = {
            let mut slot = shared.lock();
            match slot.pending.take() {
                Some(message) => message,
                None => {
                    slot.writing = false;
                    return;
                }
            }
        };
        let live = match run.engine.upgrade() {
            Some(engine) => {
                engine
                    .write_status_message(&run.id, run.fence, message)
                    .await
            }
            None => false,
        };
        if !live {
            let mut slot = shared.lock();
            slot.closed = true;
            slot.pending = None;
            slot.writing = false;
            return;
        }
        tokio::time::sleep(STATUS_FLUSH_PERIOD).await;
    }
}

impl Engine {
    /// Write a handler's status message to task `id` if the run under
    /// `fence` still runs it here. `false` when the run is over (the message
    /// was dropped, and later ones will be).
    async fn write_status_message(&self, id: &str, fence: u64, message: String) -> bool {
        let written = self
            .compare_and_set(id, Reader::Runner, |record| {
                if !transition::runs_under(record, &self.replica, fence) {
                    return Ok(Decision::Keep(false));
                }
                if record.status_message.as_deref() == Some(message.as_str()) {
                    return Ok(Decision::Keep(true));
                }
                let next = transition::with_status_message(record, &message, self.now_ms());
                Ok::<_, ()>(Decision::Write(next, true))
            })
            .await;
        match written {
            Ok(Outcome::Wrote { prev, next, .. }) => {
                self.publish(prev.status, &next, self.registry.get(id).as_ref());
                true
            }
            Ok(Outcome::Kept(live)) => live,
            Err(CasError::Gone) => false,
            Err(CasError::Read(e) | CasError::Write(e)) => {
                // The next message tries again.
                warn!(error = %e, "cannot record the handler's status message");
                true
            }
            Err(CasError::TooFast | CasError::Refused(())) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let mut s = "é".repeat(10);
        truncate(&mut s, 5);
        assert_eq!(s, "éé");
        let mut short = String::from("step 1 of 3");
        truncate(&mut short, 1024);
        assert_eq!(short, "step 1 of 3");
    }
}
