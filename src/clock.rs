//! Time: the wall clock, and a wall clock that tokio's test clock moves.

use std::time::Duration;

/// Milliseconds since the Unix epoch, from the system clock (0 before it).
pub(crate) fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Wall-clock milliseconds that advance with tokio's clock, so that
/// `tokio::time::pause` and `advance` move task timestamps and TTLs too.
#[derive(Debug)]
pub(crate) struct Clock {
    base_wall_ms: i64,
    base: tokio::time::Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            base_wall_ms: unix_now_ms(),
            base: tokio::time::Instant::now(),
        }
    }

    pub(crate) fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.base.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.base_wall_ms.saturating_add(elapsed)
    }
}
