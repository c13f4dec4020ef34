//! The reads every page and stream of one dashboard share: the counts
//! (`stats` reads every live row on the SQL stores, 0.2-0.3 s on 1M
//! tasks) and the last hour's chart (`ended`: on Redis one script over
//! the hour's ended tasks). Each open page wants them fresh after every
//! change. One read at a time serves every caller that asked before it
//! started, and reads start at most one per [`gap`] (four times the last
//! read's length, at least [`MIN_GAP`]), so the store spends at most about
//! a fifth of one connection on each however many pages are open and
//! however busy the tasks are.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::store;

/// The shortest time between the starts of two reads.
const MIN_GAP: Duration = Duration::from_millis(250);

/// The last read of one kind: when it started, how long it took, what it
/// found.
#[derive(Debug)]
pub(crate) struct SharedRead<T> {
    last: Mutex<Option<(Instant, Duration, T)>>,
}

impl<T> Default for SharedRead<T> {
    fn default() -> Self {
        SharedRead {
            last: Mutex::new(None),
        }
    }
}

impl<T: Clone> SharedRead<T> {
    /// What `read` finds, read no earlier than `since`: the last read's if
    /// it started at or after `since`, else a new one, once the gap since
    /// the last started has passed.
    pub(crate) async fn read<F, R>(&self, since: Instant, read: F) -> store::Result<T>
    where
        F: FnOnce() -> R,
        R: Future<Output = store::Result<T>>,
    {
        // Held across the read: callers queue, and find its result.
        let mut last = self.last.lock().await;
        if let Some((started, took, found)) = &*last {
            if *started >= since {
                return Ok(found.clone());
            }
            tokio::time::sleep_until(*started + gap(*took)).await;
        }
        let started = Instant::now();
        let found = read().await?;
        *last = Some((started, started.elapsed(), found.clone()));
        Ok(found)
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
    use crate::store::{MemoryStore, TaskStats};
    use crate::Operator;

    /// Callers that asked before a read started share it; one that asks
    /// after it waits out the gap and gets a new read.
    #[tokio::test(start_paused = true)]
    async fn reads_are_shared_and_spaced() {
        let operator = Operator::new(MemoryStore::new());
        let counts = SharedRead::<TaskStats>::default();
        let read = || operator.stats();
        let asked = Instant::now();
        counts.read(asked, read).await.unwrap();
        let first = counts.last.lock().await.as_ref().unwrap().0;
        counts.read(asked, read).await.unwrap();
        assert_eq!(
            counts.last.lock().await.as_ref().unwrap().0,
            first,
            "shared"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        counts.read(Instant::now(), read).await.unwrap();
        let second = counts.last.lock().await.as_ref().unwrap().0;
        assert_eq!(second - first, MIN_GAP, "a new read, one gap later");
    }
}
