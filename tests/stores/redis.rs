//! The Redis store: conformance, replicas, the change feed, exact expiry,
//! key prefixes, the eviction check, and a Redis restart in the middle of a
//! test (a server of the test's own, append-only, SIGKILLed and started
//! again).

use std::time::{Duration, Instant};

use mcp_task_layer::store::{ClaimQuery, Lease, ListQuery, RedisStore, TaskChange, TaskOutcome};
use mcp_task_layer::{JsonText, TaskStatus};
use tokio::sync::broadcast::Receiver;

use super::common::redis_db::{connection, url, Prefixes, Private};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_conforms() {
    let Some(url) = url() else { return };
    let prefixes = Prefixes::new(&url, "conf");
    let p = &prefixes;
    conformance::run(move || async move { p.store(&p.next()).await }).await;
    prefixes.drop_all().await;
}

/// Redis has no index of the arguments' text: a search walks the creation
/// index, at most `WALK_BUDGET` records a page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_search_pages_are_bounded_walks() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "walks");
    let pages =
        conformance::operator_pages_of_rare_matches_are_bounded(p.store(&p.next()).await).await;
    assert!(
        pages > 1,
        "a walk past WALK_BUDGET records stops: {pages} page(s)"
    );
    p.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replicas_act_as_one() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "replicas");
    let prefix = p.next();
    let (a, b, c) = tokio::join!(p.store(&prefix), p.store(&prefix), p.store(&prefix));
    replicas_share_one_table(vec![a, b, c]).await;
    p.drop_all().await;
}

#[tokio::test]
async fn redis_keeps_json_exactly() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "json");
    records_round_trip_exactly(p.store(&p.next()).await).await;
    unowned_tasks_list_apart(p.store(&p.next()).await).await;
    p.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_announces_partial_answers_but_not_renewals() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "notify");
    announces_every_visible_write(&p.store(&p.next()).await).await;
    p.drop_all().await;
}

async fn pttl(url: &str, key: &str) -> i64 {
    ::redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut connection(url).await)
        .await
        .unwrap()
}

/// A record reads as expired exactly at `expires_at_ms` by the layer's
/// `now_ms` (R50's TTL), whatever the server's clock: Redis's key TTL is
/// only a safety net a minute later. Reaping removes the record and every
/// index entry.
#[tokio::test]
async fn redis_expiry_is_exact_and_the_key_ttl_only_a_safety_net() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "expiry");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    let mut r = record("e", Some("alice"), T0, Some(1_000));
    r.lease = Some(Lease {
        holder: "a".into(),
        fence: 1,
        until_ms: T0 + 500,
    });
    store.create(r).await.unwrap();
    store
        .create(record("forever", Some("alice"), T0, None))
        .await
        .unwrap();
    let key = |id: &str| format!("{prefix}:task:{{{id}}}");
    let ttl = pttl(&url, &key("e")).await;
    assert!((59_000..=61_000).contains(&ttl), "key TTL {ttl} ms");
    assert_eq!(pttl(&url, &key("forever")).await, -1, "no TTL, no key TTL");

    let live = T0 + 999;
    assert!(store.get("e", live).await.unwrap().is_some());
    assert_eq!(
        store
            .list(ListQuery::new(Some("alice"), Era::Modern, 9, live))
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(store.orphans(live, 9).await.unwrap().len(), 1);
    assert!(store.delete_expired(live, 9).await.unwrap().is_empty());

    let due = T0 + 1_000;
    assert!(
        store.get("e", due).await.unwrap().is_none(),
        "expired at its instant"
    );
    let listed = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 9, due))
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["forever"]
    );
    assert!(store.orphans(due, 9).await.unwrap().is_empty());
    assert_eq!(store.delete_expired(due, 9).await.unwrap(), ["e"]);
    assert!(store.delete_expired(due, 9).await.unwrap().is_empty());
    let mut keys = p.keys().await;
    keys.sort();
    assert_eq!(
        keys,
        [
            format!("{prefix}:list:modern:=alice"),
            format!("{prefix}:ops:st:working"),
            format!("{prefix}:ops:tool:tool"),
            format!("{prefix}:ops:tools-indexed"),
            key("forever")
        ],
        "the reaped task left no key and no index entry"
    );
    p.drop_all().await;
}

/// Two prefixes on one database are two stores: the same id in both,
/// neither lists, reaps or announces the other's tasks; `?prefix=` in a
/// URL selects one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_prefixes_keep_stores_apart() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "prefix");
    let (pa, pb) = (p.next(), p.next());
    let (a, b) = (p.store(&pa).await, p.store(&pb).await);
    let mut feed_b = b.changes().unwrap();
    assert_eq!(next(&mut feed_b).await, TaskChange::Missed);
    let r = record("same", Some("alice"), T0, Some(1_000));
    a.create(r.clone()).await.unwrap();
    b.create(record("same", Some("bob"), T0, Some(1_000)))
        .await
        .unwrap();
    assert_eq!(
        a.get("same", T0).await.unwrap().unwrap().owner.as_deref(),
        Some("alice")
    );
    assert_eq!(
        b.get("same", T0).await.unwrap().unwrap().owner.as_deref(),
        Some("bob")
    );
    assert!(b
        .list(ListQuery::new(Some("alice"), Era::Modern, 9, T0))
        .await
        .unwrap()
        .is_empty());
    a.replace(r.next_version(T0 + 1), 1).await.unwrap();
    assert_eq!(a.delete_expired(T0 + 1_000, 9).await.unwrap(), ["same"]);
    assert!(
        b.get("same", T0).await.unwrap().is_some(),
        "b keeps its task"
    );
    let sep = if url.contains('?') { '&' } else { '?' };
    let by_url = mcp_task_layer::store::connect(&format!("{url}{sep}prefix={pb}"))
        .await
        .unwrap();
    let seen = by_url.get("same", T0).await.unwrap().unwrap();
    assert_eq!(seen.owner.as_deref(), Some("bob"));
    let mut done = (*seen).clone().next_version(T0 + 2);
    done.status = TaskStatus::Completed;
    by_url.replace(done, 1).await.unwrap();
    assert_eq!(
        next(&mut feed_b).await,
        TaskChange::Updated {
            id: "same".into(),
            version: 2,
            status: TaskStatus::Completed
        },
        "b's feed has b's write, not a's"
    );
    for key in p.keys().await {
        // a's mark that its tool indexes are filled is of the store, not
        // of a task.
        if key == format!("{pa}:ops:tools-indexed") {
            continue;
        }
        assert!(
            key.starts_with(&format!("{pb}:")),
            "{key} outside b's prefix"
        );
    }
    p.drop_all().await;
}

/// `maxmemory-policy allkeys-lru` may evict tasks: refused with a message
/// that says what to do, unless the URL allows it.
#[tokio::test]
async fn redis_refuses_a_server_that_may_evict_tasks() {
    let Some(server) = Private::start(&["--maxmemory-policy", "allkeys-lru"]) else {
        return;
    };
    match RedisStore::connect(&server.url()).await {
        Err(Error::Backend(e)) => {
            let e = e.to_string();
            assert!(e.contains("noeviction") && e.contains("allkeys-lru"), "{e}");
        }
        other => panic!("an evicting server must be refused, got {other:?}"),
    }
    let store = RedisStore::connect(&format!("{}?allow_eviction=true", server.url()))
        .await
        .unwrap();
    store.create(record("k", None, T0, None)).await.unwrap();
}

async fn next(feed: &mut Receiver<TaskChange>) -> TaskChange {
    tokio::time::timeout(Duration::from_secs(10), feed.recv())
        .await
        .expect("a change within 10 s")
        .expect("the feed is open")
}

/// Bounded poll (real time: the server is another process) until `store`
/// answers again.
async fn until_answering(store: &RedisStore, id: &str) -> Arc<TaskRecord> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match store.get(id, T0).await {
            Ok(Some(r)) => return r,
            Ok(None) => panic!("task {id} lost in the restart"),
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "no answer 15 s after the restart: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The Redis server is SIGKILLed and started again (append-only file,
/// fsync at every write) under a store that keeps running: no task lost or
/// duplicated, the feed announces `Missed` once it is subscribed again, the
/// scripts (gone from the new server's cache) load again, and writes,
/// announcements and reaping carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_loses_no_task_and_the_feed_says_missed() {
    let Some(mut server) = Private::start(&[]) else {
        return;
    };
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let mut feed = store.changes().unwrap();
    assert_eq!(next(&mut feed).await, TaskChange::Missed);
    let ttl = 3_600_000;
    for i in 0..20 {
        let r = record(&format!("r{i:02}"), Some("alice"), T0 + i, Some(ttl));
        store.create(r).await.unwrap();
    }
    for i in 0..5 {
        let id = format!("r{i:02}");
        let mut done = store
            .get(&id, T0)
            .await
            .unwrap()
            .unwrap()
            .next_version(T0 + 20);
        done.status = TaskStatus::Completed;
        done.outcome = Some(TaskOutcome::Result(JsonText::from_value(&json!({"n": i}))));
        store.replace(done, 1).await.unwrap();
        let announced = next(&mut feed).await;
        assert!(
            matches!(announced, TaskChange::Updated { version: 2, .. }),
            "{announced:?}"
        );
    }

    server.kill();
    assert!(
        matches!(store.get("r00", T0).await, Err(Error::Backend(_))),
        "a read while the server is down fails"
    );
    server.resume();
    until_answering(&store, "r00").await;
    assert_eq!(
        next(&mut feed).await,
        TaskChange::Missed,
        "subscribed again"
    );

    let all = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 100, T0))
        .await
        .unwrap();
    let ids: Vec<String> = all.iter().map(|r| r.id.clone()).collect();
    let expected: Vec<String> = (0..20).rev().map(|i| format!("r{i:02}")).collect();
    assert_eq!(ids, expected, "every task once, newest first");
    for r in &all {
        let finished = r.id.as_str() < "r05";
        assert_eq!(r.status == TaskStatus::Completed, finished, "{}", r.id);
        assert_eq!(r.version, if finished { 2 } else { 1 });
    }

    let r10 = store.get("r10", T0).await.unwrap().unwrap();
    let mut cancelled = r10.next_version(T0 + 30);
    cancelled.status = TaskStatus::Cancelled;
    store.replace(cancelled, 1).await.unwrap();
    assert!(matches!(
        store.replace(r10.next_version(T0 + 31), 1).await,
        Err(Error::Conflict)
    ));
    assert_eq!(
        next(&mut feed).await,
        TaskChange::Updated {
            id: "r10".into(),
            version: 2,
            status: TaskStatus::Cancelled
        }
    );
    assert!(matches!(
        store.create(record("r00", None, T0, None)).await,
        Err(Error::AlreadyExists)
    ));
    let mut reaped = store
        .delete_expired(T0 + 19 + ttl as i64, 100)
        .await
        .unwrap();
    reaped.sort();
    let mut all_ids = expected.clone();
    all_ids.sort();
    assert_eq!(reaped, all_ids, "each task reaped once");
}

/// A layer over Redis keeps serving through a Redis restart, without a
/// restart of its own: a task waiting for input before it is answered
/// after it, and completes. The server stays down for 4 s, longer than the
/// client's reconnection attempts last (about 3.5 s), and `tasks/get`
/// answers an error meanwhile, never a wrong state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_over_redis_carries_on_after_a_redis_restart() {
    use super::common::{accept, ok, Client};

    let Some(mut server) = Private::start(&[]) else {
        return;
    };
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let mut c = Client::new(super::common::layer_on(store.clone()));
    c.owner = Some("alice".into());
    let id = c.start("ask", json!({})).await;
    let asked = c.wait_for(&id, TaskStatus::InputRequired).await;
    server.kill();
    let down = Instant::now();
    while down.elapsed() < Duration::from_secs(4) {
        let e = super::common::err(&c.get(&id).await).code;
        assert_eq!(e, -32603, "a store failure, while the server is down");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.resume();
    until_answering(&store, &id).await;
    assert_eq!(c.get_ok(&id).await, asked, "read back as before");
    ok(&c.update(&id, json!({"name": accept("name", "Ada")})).await);
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
}

/// The records a claim at `now_ms` reads, each passed by (so given back).
async fn offered(store: &RedisStore, now_ms: i64) -> Vec<String> {
    let mut ids = Vec::new();
    let mut pick = |r: &TaskRecord| {
        ids.push(r.id.clone());
        None
    };
    let won = store
        .claim_runnable(ClaimQuery::new(now_ms, 10, &mut pick))
        .await
        .unwrap();
    assert!(won.is_empty());
    ids
}

/// A claim holds the runnable records it reads until it has written its
/// claims; a claimer that dies in between (here its `pick` panics) holds
/// them for 5 s by the layer's clock, and no longer.
#[tokio::test]
async fn redis_claims_held_by_a_dead_claimer_come_back_after_the_hold() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "hold");
    let store = p.store(&p.next()).await;
    let mut r = record("q", Some("alice"), T0, None);
    r.lease = Some(Lease {
        holder: Lease::QUEUED.into(),
        fence: 1,
        until_ms: T0 - 1,
    });
    store.create(r).await.unwrap();
    assert_eq!(offered(&store, T0).await, ["q"], "passed by, given back");
    let dying = store.clone();
    let died = tokio::spawn(async move {
        let mut pick = |_: &TaskRecord| -> Option<TaskRecord> { panic!("the claimer dies") };
        dying
            .claim_runnable(ClaimQuery::new(T0, 10, &mut pick))
            .await
    })
    .await;
    assert!(died.is_err(), "the claimer died between read and write");
    assert!(offered(&store, T0 + 4_999).await.is_empty(), "still held");
    assert_eq!(offered(&store, T0 + 5_001).await, ["q"], "the hold ended");
    assert_eq!(offered(&store, T0).await, ["q"], "given back to its lease");
    let q = store.get("q", T0).await.unwrap().unwrap();
    assert_eq!(q.version, 1, "never written");
    p.drop_all().await;
}
