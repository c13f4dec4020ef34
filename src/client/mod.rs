//! Client-side pieces: classifying a polled task and choosing how long to
//! wait before the next poll. Both are pure functions with no I/O.

use std::time::Duration;

use crate::protocol::TaskPollDecision;

/// Interval used when neither the caller nor the server gives one.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Shortest interval a poll loop ever sleeps, so that a server hint of `0`
/// or a caller typo cannot turn polling into a hot loop.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The sleep before the next poll.
///
/// Precedence: the caller's override, then the server's hint (milliseconds),
/// then `default`; the result is never below `floor`.
///
/// ```
/// use std::time::Duration;
/// use mcp_task_layer::client::resolve_poll_interval;
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
#[cfg(feature = "http-client")]
pub(crate) mod sse;

pub use caller::{ClientEra, ClientError, Started, TaskClient};
#[cfg(feature = "http-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-client")))]
pub use http::{HttpTransport, DEFAULT_MAX_MESSAGE_SIZE};
pub use input::InputHandler;
