//! Client-side pieces: classifying a polled task and choosing how long to
//! wait before the next poll. Both are pure functions with no I/O.

use std::time::Duration;

use crate::protocol::TaskStatus;

/// Interval used when neither the caller nor the server gives one.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Shortest interval a poll loop ever sleeps, so that a server hint of `0`
/// or a caller typo cannot turn polling into a hot loop.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The classification of a polled task, derived purely from its status: the
/// single decision every task poller consumes so the branch logic cannot
/// drift.
///
/// Produced by [`Task::poll_decision`](crate::Task::poll_decision),
/// [`DetailedTask::poll_decision`](crate::DetailedTask::poll_decision) and
/// [`TaskStatus::poll_decision`]. It answers the one question a poll loop asks
/// each tick: stop, ask the user, or sleep and poll again? It does no I/O and
/// is replay-deterministic, so it is safe inside a memoized durable step.
///
/// It derives neither `Serialize` nor `Deserialize`: it is an in-process
/// classifier, never a wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskPollDecision {
    /// The task reached `completed`, `failed` or `cancelled` and will not
    /// change again: stop polling. The result is fetched separately.
    Terminal {
        /// The terminal status that ended the task.
        status: TaskStatus,
    },
    /// The task is `working`: sleep and poll again. Feed `poll_hint` to
    /// [`resolve_poll_interval`] to get the sleep.
    InProgress {
        /// The raw server-reported interval in milliseconds, verbatim
        /// (`None` when the server suggested none).
        poll_hint: Option<u64>,
    },
    /// The task is blocked on input (`input_required`): route to whoever
    /// answers input requests rather than spinning.
    InputRequired,
}

/// The sleep before the next poll.
///
/// Precedence: the caller's override, then the server's hint (milliseconds),
/// then `default`; the result is never below `floor`.
///
/// ```
/// use std::time::Duration;
/// use mcp_task_layer::resolve_poll_interval;
///
/// let floor = Duration::from_millis(50);
/// let default = Duration::from_secs(1);
/// // The server asked for 5 s, nobody overrides it.
/// assert_eq!(resolve_poll_interval(None, Some(5_000), default, floor), Duration::from_secs(5));
/// // A server hint of 0 never makes a hot loop.
/// assert_eq!(resolve_poll_interval(None, Some(0), default, floor), floor);
/// // The caller's override wins over the hint.
/// let fast = Some(Duration::from_millis(200));
/// assert_eq!(resolve_poll_interval(fast, Some(5_000), default, floor), Duration::from_millis(200));
/// ```
pub fn resolve_poll_interval(
    caller_override: Option<Duration>,
    server_hint_ms: Option<u64>,
    default: Duration,
    floor: Duration,
) -> Duration {
    caller_override
        .or_else(|| server_hint_ms.map(Duration::from_millis))
        .unwrap_or(default)
        .max(floor)
}

mod caller;
#[cfg(feature = "http-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-client")))]
mod http;
mod input;

pub use caller::{ClientEra, ClientError, Started, TaskClient};
#[cfg(feature = "http-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-client")))]
pub use http::HttpTransport;
pub use input::InputHandler;
