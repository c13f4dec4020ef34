//! Times as an operator reads them (the `mcp-tasks` command's tables and
//! the dashboard's pages): a span in its largest whole unit, and a time
//! relative to now.

use std::fmt;

/// A span of milliseconds in its largest whole unit: `850ms`, `12s`, `5m`,
/// `3h`, `2d` (rounded down; a negative span reads as `0ms`).
///
/// ```
/// use mcp_task_layer::store::Span;
///
/// assert_eq!(Span(61_000).to_string(), "1m");
/// assert_eq!(Span(400).to_string(), "400ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub i64);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.max(0);
        let s = ms / 1000;
        match s {
            _ if s < 1 => write!(f, "{ms}ms"),
            _ if s < 60 => write!(f, "{s}s"),
            _ if s < 3_600 => write!(f, "{}m", s / 60),
            _ if s < 86_400 => write!(f, "{}h", s / 3_600),
            _ => write!(f, "{}d", s / 86_400),
        }
    }
}

/// A time (`at_ms`) relative to `now_ms`, both Unix milliseconds:
/// `12s ago`, `in 5m`.
///
/// ```
/// use mcp_task_layer::store::Relative;
///
/// assert_eq!(Relative { at_ms: 0, now_ms: 90_000 }.to_string(), "1m ago");
/// assert_eq!(Relative { at_ms: 7_200_000, now_ms: 0 }.to_string(), "in 2h");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relative {
    /// The time shown.
    pub at_ms: i64,
    /// Now.
    pub now_ms: i64,
}

impl fmt::Display for Relative {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at_ms > self.now_ms {
            write!(f, "in {}", Span(self.at_ms.saturating_sub(self.now_ms)))
        } else {
            write!(f, "{} ago", Span(self.now_ms.saturating_sub(self.at_ms)))
        }
    }
}
