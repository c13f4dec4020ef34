//! The Redis claim round writes the claims of queued records itself when
//! the round says how (`ClaimQuery::queued`), and offers every other
//! runnable record to `pick`: orphans, records with sealed fields, the
//! claimer's own runs, and records whose JSON an older version wrote.

use std::collections::BTreeMap;

use mcp_task_layer::store::{ClaimQuery, Lease, QueuedClaim, RedisStore};

use super::common::redis_db::{connection, url, Prefixes};
use super::*;

const LEASE_END: i64 = T0 + 30_000;

/// A record queued for a worker at `at` (its lease ended just before).
fn queued(id: &str, at: i64) -> TaskRecord {
    let mut r = record(id, Some("alice"), at, None);
    r.lease = Some(Lease {
        holder: Lease::QUEUED.into(),
        fence: 1,
        until_ms: at - 1,
    });
    r
}

/// `r` claimed by `w1` until [`LEASE_END`], as a worker's `pick` makes it.
fn claimed(r: &TaskRecord) -> TaskRecord {
    let mut next = r.clone();
    next.version += 1;
    next.lease = Some(Lease {
        holder: "w1".into(),
        fence: r.lease.as_ref().map_or(1, |l| l.fence + 1),
        until_ms: LEASE_END,
    });
    next
}

/// One round at `T0` as worker `w1` that runs `skip`; `take` says whether
/// its `pick` claims what it is offered. The records won, by id, and the
/// ids offered to `pick`.
async fn round(
    store: &RedisStore,
    skip: &[String],
    take: bool,
) -> (BTreeMap<String, TaskRecord>, Vec<String>) {
    let mut offered = Vec::new();
    let mut pick = |r: &TaskRecord| {
        offered.push(r.id.clone());
        take.then(|| claimed(r))
    };
    let query = ClaimQuery::new(T0, 10, &mut pick).with_queued(QueuedClaim {
        holder: "w1",
        until_ms: LEASE_END,
        skip,
    });
    let won = store.claim_runnable(query).await.unwrap();
    offered.sort();
    let won = won.iter().map(|r| (r.id.clone(), (**r).clone())).collect();
    (won, offered)
}

#[tokio::test]
async fn redis_a_claim_round_writes_the_claims_of_queued_records_itself() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "claimq");
    let store = p.store(&p.next()).await;
    let plain: Vec<TaskRecord> = ["q1", "q2", "q3"]
        .iter()
        .zip(0..)
        .map(|(id, n)| queued(id, T0 - 100 + n))
        .collect();
    let mut orphan = record("orphan", Some("alice"), T0 - 50, None);
    orphan.lease = Some(Lease {
        holder: "dead".into(),
        fence: 4,
        until_ms: T0 - 10,
    });
    let mut sealed = queued("sealed", T0 - 40);
    sealed
        .sealed
        .insert("arguments".into(), "ciphertext".into());
    let mine = queued("mine", T0 - 30);
    for r in plain.iter().chain([&orphan, &sealed, &mine]) {
        store.create(r.clone()).await.unwrap();
    }

    let (won, offered) = round(&store, &["mine".to_owned()], false).await;
    assert_eq!(offered, ["mine", "orphan", "sealed"], "offered to pick");
    let expected: BTreeMap<String, TaskRecord> =
        plain.iter().map(|r| (r.id.clone(), claimed(r))).collect();
    assert_eq!(won, expected, "claimed as pick would: version and lease");
    for (id, next) in &expected {
        let stored = store.get(id, T0).await.unwrap().unwrap();
        assert_eq!(&*stored, next, "{id} stored as answered");
    }

    // The three are claimed once; `mine`, given back, is claimed now.
    let (won, offered) = round(&store, &[], false).await;
    assert_eq!(won.into_values().collect::<Vec<_>>(), [claimed(&mine)]);
    assert_eq!(offered, ["orphan", "sealed"], "given back again");
    let mine_now = store.get("mine", T0).await.unwrap().unwrap();
    assert_eq!(*mine_now, claimed(&mine));

    // Fencing as for any claim: a write from the version before loses, the
    // result written over the claim wins.
    let q1 = &expected["q1"];
    assert!(matches!(
        store.replace(plain[0].next_version(T0 + 1), 1).await,
        Err(Error::Conflict)
    ));
    store.replace(q1.next_version(T0 + 2), 2).await.unwrap();
    assert_eq!(store.get("q1", T0).await.unwrap().unwrap().version, 3);
    p.drop_all().await;
}

/// A queued record whose JSON an older version wrote (its version and lease
/// not at the end) is offered to `pick`, and claimed by its write.
#[tokio::test]
async fn redis_a_claim_round_offers_a_record_an_older_version_stored() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "claimold");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    let old = queued("old", T0 - 100);
    store.create(old.clone()).await.unwrap();
    let json = serde_json::to_string(&old).unwrap();
    let version = ",\"version\":1,";
    let at = json
        .find(version)
        .expect("the version in the record's JSON");
    let reordered = format!(
        "{{\"version\":1,{}{}",
        &json[1..at],
        &json[at + version.len() - 1..]
    );
    assert!(reordered.ends_with("}}") && !reordered.contains(",\"version\""));
    let () = ::redis::cmd("HSET")
        .arg(format!("{prefix}:task:{{old}}"))
        .arg("rec")
        .arg(&reordered)
        .query_async(&mut connection(&url).await)
        .await
        .unwrap();
    assert_eq!(*store.get("old", T0).await.unwrap().unwrap(), old);

    let (won, offered) = round(&store, &[], true).await;
    assert_eq!(offered, ["old"]);
    assert_eq!(won["old"], claimed(&old));
    assert_eq!(*store.get("old", T0).await.unwrap().unwrap(), claimed(&old));
    p.drop_all().await;
}

/// Adds the `leases` entries of 2,500 tasks that are gone (Redis deleted
/// them by their key's TTL), ending before any other entry.
async fn gone_leases(url: &str, prefix: &str) -> ::redis::aio::MultiplexedConnection {
    let mut conn = connection(url).await;
    let mut zadd = ::redis::cmd("ZADD");
    zadd.arg(format!("{prefix}:leases"));
    for i in 0..2_500 {
        zadd.arg(T0 - 10_000 + i).arg(format!("gone{i}"));
    }
    let () = zadd.query_async(&mut conn).await.unwrap();
    conn
}

async fn leases(conn: &mut ::redis::aio::MultiplexedConnection, prefix: &str) -> usize {
    ::redis::cmd("ZCARD")
        .arg(format!("{prefix}:leases"))
        .query_async(conn)
        .await
        .unwrap()
}

/// A claim round examines at most 1,000 `leases` entries and drops those
/// of tasks that are gone: the queued task behind 2,500 of them is claimed
/// by the third round, and no round walks them all.
#[tokio::test]
async fn redis_a_claim_round_examines_a_bounded_number_of_entries() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "claimcap");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    store.create(queued("late", T0 - 10)).await.unwrap();
    let mut conn = gone_leases(&url, &prefix).await;
    for left in [1_501, 501] {
        let (won, offered) = round(&store, &[], true).await;
        assert!(won.is_empty() && offered.is_empty());
        assert_eq!(leases(&mut conn, &prefix).await, left);
    }
    let (won, _) = round(&store, &[], true).await;
    assert_eq!(won.keys().collect::<Vec<_>>(), ["late"]);
    assert_eq!(leases(&mut conn, &prefix).await, 1);
    p.drop_all().await;
}

/// The orphan scan, likewise: at most 1,000 entries a call, the gone
/// ones dropped, the orphan behind them found by the third call.
#[tokio::test]
async fn redis_an_orphan_scan_examines_a_bounded_number_of_entries() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "orphancap");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    let mut orphan = record("orphan", Some("alice"), T0 - 50, None);
    orphan.lease = Some(Lease {
        holder: "dead".into(),
        fence: 4,
        until_ms: T0 - 10,
    });
    store.create(orphan).await.unwrap();
    let mut conn = gone_leases(&url, &prefix).await;
    for left in [1_501, 501] {
        assert!(store.orphans(T0, 10).await.unwrap().is_empty());
        assert_eq!(leases(&mut conn, &prefix).await, left);
    }
    let found = store.orphans(T0, 10).await.unwrap();
    assert_eq!(
        found.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["orphan"]
    );
    p.drop_all().await;
}
