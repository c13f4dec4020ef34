//! The operator's count of ended tasks by when they ended
//! ([`OperatorStore::ended`]): tasks that ended by a replace and tasks
//! created ended, each in the span of its last write; nothing unfinished,
//! expired, purged or outside the spans.

use super::{ops, record, T0};
use crate::protocol::TaskStatus;
use crate::store::{EndedQuery, TaskQuery, TaskStore};

/// Tasks are counted in the minute they ended (not the one they were
/// created in), by how they ended; a purged one no longer is.
pub async fn operator_counts_ended_tasks_by_when_they_ended<S: TaskStore>(store: S) {
    const MIN: i64 = 60_000;
    // (id, status it ends in, when it ends, created ended)
    let ends = [
        ("long", TaskStatus::Completed, T0 + 10 * MIN + 5, false),
        ("quick", TaskStatus::Completed, T0 + 10 * MIN + 6, true),
        ("broke", TaskStatus::Failed, T0 + 11 * MIN, false),
        ("stop", TaskStatus::Cancelled, T0 + 13 * MIN - 1, false),
        ("early", TaskStatus::Completed, T0 + 9 * MIN, false),
        ("late", TaskStatus::Completed, T0 + 13 * MIN, false),
    ];
    for (id, status, at, created_ended) in ends {
        // Created an hour before it ends (long before the spans).
        let mut r = record(id, Some("alice"), at - 60 * MIN, None);
        if created_ended {
            r.status = status;
            r.updated_at_ms = at;
            r.arguments = None;
            store.create(r).await.expect("create");
        } else {
            store.create(r.clone()).await.expect("create");
            let mut done = r.next_version(at);
            done.status = status;
            done.arguments = None;
            store.replace(done, r.version).await.expect("replace");
        }
    }
    // Still running; and ended, but expired by the time of the count.
    store
        .create(record("run", None, T0 + 10 * MIN, None))
        .await
        .expect("create");
    let mut gone = record("gone", None, T0, Some((11 * MIN + 1) as u64));
    gone.status = TaskStatus::Completed;
    gone.updated_at_ms = T0 + 10 * MIN;
    store.create(gone).await.expect("create");

    let now = T0 + 13 * MIN;
    let query = EndedQuery {
        since_ms: T0 + 10 * MIN,
        now_ms: now,
        bucket_ms: MIN,
    };
    let counts = ops(&store).ended(query).await.expect("ended");
    assert_eq!(
        counts.spans,
        [[2, 0, 0], [0, 1, 0], [0, 0, 1]],
        "each in the minute it ended; not before the spans, not at `now`"
    );
    // Purged: no longer counted.
    let purged = ops(&store)
        .purge(&TaskQuery::new().status(TaskStatus::Failed), now)
        .await
        .expect("purge");
    assert_eq!(purged.deleted, 1);
    let counts = ops(&store).ended(query).await.expect("ended");
    assert_eq!(counts.totals(), [2, 0, 1]);
}
