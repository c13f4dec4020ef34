//! A gap in the change feed (`TaskChange::Missed`: the subscription made
//! or made again, or the process behind it) must not hide a cancel written
//! by another replica from a handler running here until its next heartbeat
//! (issue 33: the Redis replica test's cancel, published before the
//! running replica's subscription was up, reached its handler only at the
//! heartbeat). Two replicas on one `MemoryStore`, under paused tokio time;
//! the running replica's feed is the test's.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::fed::FedStore;
use common::{layer_on, ok, Client};
use mcp_task_layer::store::TaskChange;
use mcp_task_layer::MemoryStore;
use serde_json::json;

/// A cancel written on replica B while A's feed was not delivering stops
/// A's handler as soon as A's feed reports the gap, not at A's heartbeat
/// (20 minutes here).
#[tokio::test(start_paused = true)]
async fn a_cancel_in_a_feed_gap_stops_the_handler_when_the_gap_is_reported() {
    let shared = MemoryStore::new();
    let (store, feed, _) = FedStore::new(shared.clone());
    let hour = Duration::from_secs(3600);
    let a = Client::new(layer_on(store).with_lease_ttl(hour));
    let b = Client::new(layer_on(shared).with_lease_ttl(hour));
    let id = a.start("hang", json!({})).await;
    ok(&b.cancel(&id).await);
    // Nothing on A's feed: its handler runs on.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(a.seen.cancelled_handlers.load(Ordering::SeqCst), 0);
    let started = tokio::time::Instant::now();
    feed.send(TaskChange::Missed).unwrap();
    common::eventually(
        || a.seen.cancelled_handlers.load(Ordering::SeqCst) == 1,
        "the handler on A stopped",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped by the heartbeat, not the gap: {:?}",
        started.elapsed()
    );
}
