//! The Redis store's batched writes: writes made at the same time go in
//! one script call, and each is still its own create or compare-and-set,
//! its caller told its own answer; a replace puts a record stored by an
//! older version (without the operator's indexes) in every index.

use mcp_task_layer::store::{Lease, TaskQuery};
use mcp_task_layer::TaskStatus;

use super::common::redis_db::{connection, url, Prefixes};
use super::*;

/// 300 writes at once, a third of them doomed (a create of an id that
/// exists, a replace over a version that is not the stored one): each
/// caller hears its own answer, and the store holds what the winners
/// wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_writes_made_at_once_each_get_their_own_answer() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "batch");
    let store = Arc::new(p.store(&p.next()).await);
    for i in 0..100 {
        let r = record(&format!("old{i:03}"), Some("alice"), T0 + i, None);
        store.create(r).await.unwrap();
    }
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..100_i64 {
        let s = Arc::clone(&store);
        writes.spawn(async move {
            let id = format!("new{i:03}");
            let r = record(&id, Some("bob"), T0 + 1_000 + i, None);
            (id, "create", s.create(r).await)
        });
        let s = Arc::clone(&store);
        writes.spawn(async move {
            let id = format!("old{:03}", i);
            let again = record(&id, None, T0, None);
            (id, "create again", s.create(again).await)
        });
        let s = Arc::clone(&store);
        writes.spawn(async move {
            let id = format!("old{i:03}");
            let mut next = record(&id, Some("alice"), T0 + i, None).next_version(T0 + 5_000);
            next.status = TaskStatus::Completed;
            // Even ones over the stored version 1, odd ones over a version
            // the task never had.
            let expected = if i % 2 == 0 { 1 } else { 7 };
            (id, "replace", s.replace(next, expected).await)
        });
    }
    let mut outcomes = Vec::new();
    while let Some(done) = writes.join_next().await {
        outcomes.push(done.unwrap());
    }
    assert_eq!(outcomes.len(), 300);
    for (id, what, outcome) in &outcomes {
        let n: usize = id[3..].parse().unwrap();
        match *what {
            "create" => assert!(outcome.is_ok(), "{id}: {outcome:?}"),
            "create again" => {
                assert!(
                    matches!(outcome, Err(Error::AlreadyExists)),
                    "{id}: {outcome:?}"
                );
            }
            _ if n % 2 == 0 => assert!(outcome.is_ok(), "{id}: {outcome:?}"),
            _ => assert!(matches!(outcome, Err(Error::Conflict)), "{id}: {outcome:?}"),
        }
    }
    for i in 0..100_i64 {
        let old = store.get(&format!("old{i:03}"), T0).await.unwrap().unwrap();
        let (status, version) = if i % 2 == 0 {
            (TaskStatus::Completed, 2)
        } else {
            (TaskStatus::Working, 1)
        };
        assert_eq!((old.status, old.version), (status, version));
        assert_eq!(
            old.owner.as_deref(),
            Some("alice"),
            "not the second create's"
        );
        let new = store.get(&format!("new{i:03}"), T0).await.unwrap().unwrap();
        assert_eq!(new.owner.as_deref(), Some("bob"));
    }
    let completed = TaskQuery::new().status(TaskStatus::Completed).limit(200);
    let found = ops(store.as_ref()).find(&completed, T0).await.unwrap();
    assert_eq!(found.tasks.len(), 50, "the status index holds the winners");
    p.drop_all().await;
}

/// A record an older version stored is in none of the operator's indexes
/// (and has no `tk`); its next write puts it in every one, though its
/// status does not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replace_indexes_a_record_an_older_version_stored() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "batchold");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    let first = record("t1", Some("alice"), T0, None);
    store.create(first.clone()).await.unwrap();
    let mut conn = connection(&url).await;
    let member = list_member(&mut conn, &prefix, "t1").await;
    let () = ::redis::cmd("HDEL")
        .arg(format!("{prefix}:task:{{t1}}"))
        .arg("tk")
        .query_async(&mut conn)
        .await
        .unwrap();
    for index in ["ops:all", "ops:st:working", "ops:tool:tool"] {
        let () = ::redis::cmd("ZREM")
            .arg(format!("{prefix}:{index}"))
            .arg(&member)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let working = TaskQuery::new().status(TaskStatus::Working);
    let listed = |q: TaskQuery| {
        let store = &store;
        async move { ops(store).find(&q, T0 + 10).await.unwrap().tasks.len() }
    };
    assert_eq!(
        listed(working.clone()).await,
        0,
        "as an older version left it"
    );

    store.replace(first.next_version(T0 + 5), 1).await.unwrap();
    assert_eq!(listed(working).await, 1, "in its status's index again");
    assert_eq!(
        listed(TaskQuery::new()).await,
        1,
        "in the index of every task"
    );
    assert_eq!(
        listed(TaskQuery::new().tool("tool")).await,
        1,
        "in its tool's"
    );
    p.drop_all().await;
}

/// A task key's TTL is set by the create and by the writes that change the
/// record's expiry; a claim, a lease renewal and a write that only moves
/// `updated_at_ms` (a result) leave it: the deadline is the same, and a
/// queued task costs one command at its create only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_lease_write_leaves_the_key_ttl() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "batchttl");
    let prefix = p.next();
    let store = p.store(&prefix).await;
    let day: i64 = 86_400_000;
    let first = record("t1", None, T0, Some(day.unsigned_abs()));
    store.create(first.clone()).await.unwrap();
    let key = format!("{prefix}:task:{{t1}}");
    let mut conn = connection(&url).await;
    let (probe_key, probe) = (key.clone(), conn.clone());
    let pttl = move || {
        let (key, mut conn) = (probe_key.clone(), probe.clone());
        async move {
            ::redis::cmd("PTTL")
                .arg(key)
                .query_async::<i64>(&mut conn)
                .await
                .unwrap()
        }
    };
    assert!(
        pttl().await > day,
        "the create sets it: the day and a margin"
    );
    let () = ::redis::cmd("PEXPIRE")
        .arg(&key)
        .arg(5_000_000)
        .query_async(&mut conn)
        .await
        .unwrap();

    let mut leased = first.clone();
    leased.version = 2;
    leased.lease = Some(Lease {
        holder: "worker".into(),
        fence: 1,
        until_ms: T0 + 30_000,
    });
    store.replace(leased.clone(), 1).await.unwrap();
    let mut renewed = leased.clone();
    renewed.version = 3;
    renewed.lease = Some(Lease {
        until_ms: T0 + 60_000,
        ..leased.lease.clone().unwrap()
    });
    store.replace(renewed.clone(), 2).await.unwrap();
    let kept = pttl().await;
    assert!(
        (0..=5_000_000).contains(&kept),
        "a claim and a renewal leave the TTL: {kept}"
    );

    let moved = renewed.next_version(T0 + 5);
    store.replace(moved.clone(), 3).await.unwrap();
    let kept = pttl().await;
    assert!(
        (0..=5_000_000).contains(&kept),
        "a write that moves only updated_at_ms leaves it: {kept}"
    );
    let mut longer = moved.next_version(T0 + 6);
    longer.ttl_ms = Some(2 * day.unsigned_abs());
    store.replace(longer, 4).await.unwrap();
    assert!(
        pttl().await > 2 * day - 10_000,
        "a write that changes the expiry sets it again"
    );
    let got = store.get("t1", T0 + 10).await.unwrap().unwrap();
    assert_eq!(got.version, 5);
    p.drop_all().await;
}

/// Poll `f` on this thread until it is ready: an executor that is not
/// tokio's.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// A write from a thread without a tokio runtime is sent by the store's
/// own runtime, and answered there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_writes_from_a_thread_without_a_runtime() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "batchthread");
    let store = p.store(&p.next()).await;
    let s = store.clone();
    let thread = std::thread::spawn(move || {
        let r = record("t1", Some("alice"), T0, None);
        block_on(s.create(r.clone()))?;
        block_on(s.replace(r.next_version(T0 + 5), 1))
    });
    let written = tokio::task::spawn_blocking(move || thread.join().expect("no panic"))
        .await
        .unwrap();
    assert!(written.is_ok(), "{written:?}");
    let stored = store.get("t1", T0).await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    p.drop_all().await;
}

/// A store whose runtime has ended fails a write instead of leaving its
/// caller waiting for a batch loop that can never run, and fails the next
/// one the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_writes_fail_once_the_stores_runtime_has_ended() {
    let Some(url) = url() else { return };
    let p = Prefixes::new(&url, "batchended");
    let prefix = p.next();
    let p2 = Prefixes::new(&url, "batchended");
    let store = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let store = rt.block_on(p2.store(&prefix));
        drop(rt);
        store
    })
    .await
    .unwrap();
    for id in ["t1", "t2"] {
        let write = store.create(record(id, Some("alice"), T0, None));
        let written = tokio::time::timeout(std::time::Duration::from_secs(20), write)
            .await
            .expect("the write answers, not waits for ever");
        assert!(written.is_err(), "{written:?}");
    }
    p.drop_all().await;
}
