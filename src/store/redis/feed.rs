//! The change feed: the channel the write scripts publish on, read by one
//! pub/sub connection per store (and its clones).

use std::sync::OnceLock;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::store::{parse_change, TaskChange};

/// Changes buffered per receiver before it lags (and re-reads).
const CAPACITY: usize = 4096;

/// A connection is pinged this often, so a silently dead one (a cut
/// network) is noticed and replaced, and receivers told `Missed`.
const PING_EVERY: Duration = Duration::from_secs(10);

/// Pause between failed connection attempts.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The feed of one store and its clones: started by the first `changes()`,
/// stopped when the last clone is dropped (or the store closed).
#[derive(Debug, Default)]
pub(super) struct Feed {
    tx: OnceLock<broadcast::Sender<TaskChange>>,
    pub(super) stop: CancellationToken,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Feed {
    /// A receiver; the first call starts the listener on this runtime.
    pub(super) fn subscribe(
        &self,
        client: &redis::Client,
        channel: &str,
    ) -> Option<broadcast::Receiver<TaskChange>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        // The first receiver exists before the listener starts, or it could
        // miss the first `Missed` (sent from another worker thread).
        let mut first = None;
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = broadcast::channel(CAPACITY);
            first = Some(rx);
            let listener = listen(
                client.clone(),
                channel.to_owned(),
                tx.clone(),
                self.stop.clone(),
            );
            runtime.spawn(listener);
            tx
        });
        Some(first.unwrap_or_else(|| tx.subscribe()))
    }
}

/// Forward the channel's messages to `tx` until `stop`. After every
/// (re)subscription receivers are told that changes may have been missed:
/// Redis keeps no pub/sub message for a client that was away.
async fn listen(
    client: redis::Client,
    channel: String,
    tx: broadcast::Sender<TaskChange>,
    stop: CancellationToken,
) {
    loop {
        let connected = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub.split())
        };
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            outcome = connected => outcome,
        };
        let (mut sink, mut messages) = match outcome {
            Ok(split) => split,
            Err(e) => {
                tracing::warn!(error = %e, "cannot subscribe to task changes; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RETRY_AFTER) => {}
                }
                continue;
            }
        };
        let _ = tx.send(TaskChange::Missed);
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                message = messages.next() => {
                    let Some(message) = message else {
                        tracing::warn!("the task change feed lost its connection; reconnecting");
                        break;
                    };
                    if let Some(change) = message
                        .get_payload::<String>()
                        .ok()
                        .and_then(|p| parse_change(&p))
                    {
                        let _ = tx.send(change);
                    }
                }
                _ = ping.tick() => {
                    let pong = tokio::time::timeout(PING_EVERY, sink.ping::<redis::Value>()).await;
                    if !matches!(pong, Ok(Ok(_))) {
                        tracing::warn!("the task change feed stopped answering; reconnecting");
                        break;
                    }
                }
            }
        }
    }
}
