//! The counts every page and stream of one dashboard share: `stats` reads
//! every live row on the SQL stores (0.2-0.3 s on 1M tasks), and each open
//! page wants fresh counts after every change. One read at a time serves
//! every caller that asked before it started, and reads start at most one
//! per [`gap`] (four times the last read's length, at least
//! [`MIN_GAP`]), so the database spends at most about a fifth of one
//! connection on them however many pages are open and however busy the
//! tasks are.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::store::{self, TaskStats};
use crate::Operator;

/// The shortest time between the starts of two reads.
const MIN_GAP: Duration = Duration::from_millis(250);

/// The last read: when it started, how long it took, what it found.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    last: Mutex<Option<(Instant, Duration, TaskStats)>>,
}

impl Counts {
    /// Counts read no earlier than `since`: the last read's if it started
    /// at or after `since`, else a new one, once the gap since the last
    /// started has passed.
    pub(crate) async fn read(
        &self,
        operator: &Operator,
        since: Instant,
    ) -> store::Result<TaskStats> {
        // Held across the read: callers queue, and find its result.
        let mut last = self.last.lock().await;
        if let Some((started, took, stats)) = &*last {
            if *started >= since {
                return Ok(stats.clone());
            }
            tokio::time::sleep_until(*started + gap(*took)).await;
        }
        let started = Instant::now();
        let stats = operator.stats().await?;
        *last = Some((started, started.elapsed(), stats.clone()));
        Ok(stats)
    }
}

/// The time from one read's start to the next: four times its length,
/// at least [`MIN_GAP`].
fn gap(took: Duration) -> Duration {
    (took * 4).max(MIN_GAP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    /// Callers that asked before a read started share it; one that asks
    /// after it waits out the gap and gets a new read.
    #[tokio::test(start_paused = true)]
    async fn reads_are_shared_and_spaced() {
        let operator = Operator::new(MemoryStore::new());
        let counts = Counts::default();
        let asked = Instant::now();
        counts.read(&operator, asked).await.unwrap();
        let first = counts.last.lock().await.as_ref().unwrap().0;
        counts.read(&operator, asked).await.unwrap();
        assert_eq!(
            counts.last.lock().await.as_ref().unwrap().0,
            first,
            "shared"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        counts.read(&operator, Instant::now()).await.unwrap();
        let second = counts.last.lock().await.as_ref().unwrap().0;
        assert_eq!(second - first, MIN_GAP, "a new read, one gap later");
    }
}
