//! The checks of what a worker or a recovering replica may take over:
//! orphans and claims.

use super::{record, T0};
use crate::json::JsonText;
use crate::protocol::TaskStatus;
use crate::store::{ClaimQuery, Error, Lease, QueuedClaim, TaskOutcome, TaskRecord, TaskStore};
use serde_json::json;

/// `orphans` finds `working` records whose lease ran out, and nothing else:
/// not a live lease, not a record without one, not a finished or expired
/// record, not one whose lease was renewed since.
pub async fn orphans_are_working_tasks_whose_lease_ran_out<S: TaskStore>(store: S) {
    match store.orphans(T0, 1).await {
        Err(Error::Unsupported(_)) => return,
        Err(e) => panic!("orphans failed: {e:?}"),
        Ok(found) => assert!(found.is_empty(), "an empty store has no orphans"),
    }
    let leased = |id: &str, until_ms: i64, ttl: Option<u64>| {
        let mut r = record(id, Some("alice"), T0, ttl);
        r.lease = Some(Lease {
            holder: "replica-a".into(),
            fence: 1,
            until_ms,
        });
        r
    };
    for r in [
        leased("dead1", T0 + 1_000, None),
        leased("dead2", T0 + 2_000, Some(600_000)),
        leased("alive", T0 + 60_000, None),
        leased("expired", T0 + 1_000, Some(3_000)),
        leased("renewed", T0 + 1_000, None),
        leased("done", T0 + 1_000, None),
        record("unleased", None, T0, None),
    ] {
        store.create(r).await.expect("create");
    }
    let renewed = store
        .get("renewed", T0)
        .await
        .expect("get")
        .expect("renewed");
    let mut next = renewed.next_version(T0 + 500);
    if let Some(lease) = &mut next.lease {
        lease.until_ms = T0 + 60_000;
    }
    store.replace(next, 1).await.expect("renew");
    let done = store.get("done", T0).await.expect("get").expect("done");
    let mut next = done.next_version(T0 + 500);
    next.status = TaskStatus::Completed;
    next.outcome = Some(TaskOutcome::Result(JsonText::from_value(&json!({}))));
    store.replace(next, 1).await.expect("finish");

    let now = T0 + 5_000;
    let found = store.orphans(now, 10).await.expect("orphans");
    let mut ids: Vec<_> = found.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        ["dead1", "dead2"],
        "orphans are working records whose lease ran out, unexpired"
    );
    let dead1 = found.iter().find(|r| r.id == "dead1").expect("dead1");
    assert_eq!(
        **dead1,
        *store.get("dead1", now).await.expect("get").expect("dead1"),
        "orphans come back whole"
    );
    assert_eq!(
        store.orphans(now, 1).await.expect("orphans").len(),
        1,
        "limit"
    );
    assert!(
        store
            .orphans(T0 + 500, 10)
            .await
            .expect("orphans")
            .is_empty(),
        "a lease that has not run out yet is not an orphan's"
    );
}

/// `claim_runnable` offers runnable records oldest lease end first, writes
/// what `pick` makes of them and nothing it passes by, and never hands one
/// record to two concurrent claims.
pub async fn claims_take_the_oldest_runnable_once<S: TaskStore>(store: S) {
    let until_ms = T0 + 60_000;
    let claim = |r: &TaskRecord, worker: &str| {
        let mut next = r.next_version(T0 + 10);
        next.lease = Some(Lease {
            holder: worker.into(),
            fence: 2,
            until_ms,
        });
        next
    };
    let mut nothing = |_: &TaskRecord| None;
    match store
        .claim_runnable(ClaimQuery::new(T0, 10, &mut nothing))
        .await
    {
        Err(Error::Unsupported(_)) => return,
        Err(e) => panic!("claim_runnable failed: {e:?}"),
        Ok(won) => assert!(won.is_empty(), "an empty store has nothing to claim"),
    }
    let queued = |id: &str, until_ms: i64| {
        let mut r = record(id, Some("alice"), T0, None);
        r.lease = Some(Lease {
            holder: Lease::QUEUED.into(),
            fence: 1,
            until_ms,
        });
        r
    };
    // Created out of order: the order is the lease's end.
    for r in [
        queued("q3", T0 - 3),
        queued("q1", T0 - 5),
        queued("q4", T0 - 2),
        queued("q2", T0 - 4),
        queued("later", T0 + 1_000),
        record("unleased", None, T0, None),
    ] {
        store.create(r).await.expect("create");
    }
    let mut offered = Vec::new();
    let mut pick = |r: &TaskRecord| {
        offered.push(r.id.clone());
        (r.id != "q1").then(|| claim(r, "w1"))
    };
    let won = store
        .claim_runnable(ClaimQuery::new(T0, 3, &mut pick))
        .await
        .expect("claim");
    assert_eq!(offered, ["q1", "q2", "q3"], "oldest first, at most `limit`");
    let ids: Vec<_> = won.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["q2", "q3"], "the records picked, in order");
    for r in &won {
        let stored = store.get(&r.id, T0).await.expect("get").expect("claimed");
        assert_eq!(*stored, **r, "a claim is written as picked");
    }
    let q1 = store.get("q1", T0).await.expect("get").expect("q1");
    assert_eq!(q1.version, 1, "a record passed by is not written");

    // Two claims at once share q1 and q4 and never both take one.
    let (mut pick_a, mut pick_b) = (
        |r: &TaskRecord| Some(claim(r, "a")),
        |r: &TaskRecord| Some(claim(r, "b")),
    );
    let (a, b) = tokio::join!(
        store.claim_runnable(ClaimQuery::new(T0, 2, &mut pick_a)),
        store.claim_runnable(ClaimQuery::new(T0, 2, &mut pick_b)),
    );
    let mut ids: Vec<String> = a
        .expect("claim a")
        .iter()
        .chain(b.expect("claim b").iter())
        .map(|r| r.id.clone())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        ["q1", "q4"],
        "every runnable record claimed exactly once"
    );
    let mut any = |r: &TaskRecord| Some(claim(r, "c"));
    assert!(
        store
            .claim_runnable(ClaimQuery::new(T0, 10, &mut any))
            .await
            .expect("claim")
            .is_empty(),
        "a claimed record, a live lease and no lease are not runnable"
    );
}

/// With [`ClaimQuery::queued`] set, the records won and stored are what
/// `pick` makes, whether the store asked `pick` or claimed a queued record
/// itself: the next version under the lease `{holder, fence + 1,
/// until_ms}`. A record in `skip` is offered to `pick` (which passes it by
/// here), never claimed by the store.
pub async fn claims_of_queued_records_are_what_pick_makes<S: TaskStore>(store: S) {
    let until_ms = T0 + 60_000;
    let claimed = |r: &TaskRecord| {
        let mut next = r.clone();
        next.version += 1;
        next.lease = Some(Lease {
            holder: "w1".into(),
            fence: r.lease.as_ref().map_or(1, |l| l.fence + 1),
            until_ms,
        });
        next
    };
    let leased = |id: &str, holder: &str, fence: u64, until_ms: i64| {
        let mut r = record(id, Some("alice"), T0 - 100, None);
        r.lease = Some(Lease {
            holder: holder.into(),
            fence,
            until_ms,
        });
        r
    };
    let records = [
        leased("q1", Lease::QUEUED, 1, T0 - 5),
        leased("orphan", "dead", 3, T0 - 4),
        leased("q2", Lease::QUEUED, 2, T0 - 3),
        leased("mine", Lease::QUEUED, 1, T0 - 2),
    ];
    for r in &records {
        store.create(r.clone()).await.expect("create");
    }
    let skip = ["mine".to_owned()];
    let mut pick = |r: &TaskRecord| (r.id != "mine").then(|| claimed(r));
    let query = ClaimQuery::new(T0, 10, &mut pick).with_queued(QueuedClaim {
        holder: "w1",
        until_ms,
        skip: &skip,
    });
    let won = match store.claim_runnable(query).await {
        Err(Error::Unsupported(_)) => return,
        Err(e) => panic!("claim_runnable failed: {e:?}"),
        Ok(won) => won,
    };
    let mut ids: Vec<_> = won.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        ["orphan", "q1", "q2"],
        "every runnable record but mine"
    );
    for r in &won {
        let before = records.iter().find(|b| b.id == r.id).expect("created");
        assert_eq!(**r, claimed(before), "{} claimed as pick makes it", r.id);
        let stored = store.get(&r.id, T0).await.expect("get").expect("claimed");
        assert_eq!(*stored, claimed(before), "{} stored as won", r.id);
    }
    let mine = store.get("mine", T0).await.expect("get").expect("mine");
    assert_eq!(*mine, records[3], "a run the claimer holds is not claimed");
}
