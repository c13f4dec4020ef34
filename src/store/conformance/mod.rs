//! The store conformance suite: one set of checks every [`TaskStore`] must
//! pass, for this crate's backends and for third-party ones.
//!
//! Call [`run`] from a test with a function that makes an empty store:
//!
//! ```
//! use mcp_task_layer::store::{conformance, MemoryStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! conformance::run(|| async { MemoryStore::new() }).await;
//! # }
//! ```
//!
//! Every check panics with a message naming the broken rule, like an
//! `assert!` in a test. A store must offer the operator API
//! ([`TaskStore::operator`]) to pass.

use std::future::Future;
use std::sync::Arc;

use serde_json::json;

use super::{Era, Error, ListQuery, TaskOutcome, TaskRecord, TaskStore};
use crate::json::JsonText;
use crate::protocol::TaskStatus;

mod ended;
mod operator;
mod runnable;
mod search;
mod walk;

pub use ended::operator_counts_ended_tasks_by_when_they_ended;
pub use operator::{
    operator_counts_tasks_and_waits, operator_lists_every_task_with_filters,
    operator_pages_by_cursor, operator_pages_stay_stable_under_concurrent_writes,
    operator_purges_only_finished_tasks,
};
pub use runnable::{
    claims_of_queued_records_are_what_pick_makes, claims_take_the_oldest_runnable_once,
    orphans_are_working_tasks_whose_lease_ran_out,
};
pub use search::operator_search_matches_exact_text;
pub use walk::operator_pages_of_rare_matches_are_bounded;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// The store's operator API, which a store must offer to pass.
fn ops<S: TaskStore>(store: &S) -> &dyn super::OperatorStore {
    store
        .operator()
        .expect("the store must offer the operator API (TaskStore::operator)")
}

fn record(id: &str, owner: Option<&str>, created: i64, ttl: Option<u64>) -> TaskRecord {
    TaskRecord::new(id, Era::Modern, "tool", json!({"a": 1}), created, ttl)
        .with_owner(owner.map(str::to_owned))
}

/// Run every check, each on a fresh store from `make`.
pub async fn run<S, F, Fut>(make: F)
where
    S: TaskStore,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    create_then_get(make().await).await;
    create_is_insert_if_absent(make().await).await;
    replace_is_compare_and_set(make().await).await;
    expired_records_are_hidden_and_reaped(make().await).await;
    racing_replaces_have_one_winner(make().await).await;
    list_is_per_owner_newest_first(make().await).await;
    list_never_shows_another_owner_or_era(make().await).await;
    list_fills_pages_past_expired_records(make().await).await;
    orphans_are_working_tasks_whose_lease_ran_out(make().await).await;
    ready_reads_agree_with_get(make().await).await;
    claims_take_the_oldest_runnable_once(make().await).await;
    claims_of_queued_records_are_what_pick_makes(make().await).await;
    operator_lists_every_task_with_filters(make().await).await;
    operator_pages_by_cursor(make().await).await;
    operator_pages_stay_stable_under_concurrent_writes(make().await).await;
    operator_counts_tasks_and_waits(make().await).await;
    operator_purges_only_finished_tasks(make().await).await;
    operator_search_matches_exact_text(make().await).await;
    operator_counts_ended_tasks_by_when_they_ended(make().await).await;
    operator_pages_of_rare_matches_are_bounded(make().await).await;
}

/// A created record reads back equal (its recovery policy and status
/// history too); an unknown id reads as `None`.
pub async fn create_then_get<S: TaskStore>(store: S) {
    let mut r = record("c1", Some("alice"), T0, Some(60_000));
    r.recovery = Some(crate::config::Recovery::Rerun);
    r.history = vec![crate::store::StatusChange {
        status: TaskStatus::InputRequired,
        at_ms: T0 + 1,
    }];
    store.create(r.clone()).await.expect("create");
    let got = store
        .get("c1", T0)
        .await
        .expect("get")
        .expect("created record is readable");
    assert_eq!(*got, r, "a record must read back exactly as created");
    assert!(
        store.get("nope", T0).await.expect("get").is_none(),
        "unknown id must read as None"
    );
}

/// A store that reads without waiting ([`TaskStore::get_ready`],
/// [`TaskStore::view_ready`]) answers exactly as `get`: running, finished
/// (a result, an error), expired and unknown records.
pub async fn ready_reads_agree_with_get<S: TaskStore>(store: S) {
    let running = record("r1", Some("alice"), T0, Some(60_000));
    store.create(running.clone()).await.expect("create");
    let first = record("r2", None, T0, Some(1_000));
    store.create(first.clone()).await.expect("create");
    let mut done = first.next_version(T0 + 1);
    done.status = TaskStatus::Completed;
    // A finished record keeps its history (a store may keep it compact).
    done.history = vec![crate::store::StatusChange {
        status: TaskStatus::Completed,
        at_ms: T0 + 1,
    }];
    done.arguments = None;
    done.outcome = Some(TaskOutcome::Result(JsonText::from_value(
        &json!({"ok": [1]}),
    )));
    store.replace(done, 1).await.expect("replace");
    let failing = record("r3", Some("bob"), T0, None);
    store.create(failing.clone()).await.expect("create");
    let mut failed = failing.next_version(T0 + 5);
    failed.status = TaskStatus::Failed;
    failed.status_message = Some("no luck".into());
    failed.arguments = None;
    failed.outcome = Some(TaskOutcome::Error(
        crate::jsonrpc::JsonRpcError::invalid_params("no luck"),
    ));
    store.replace(failed, 1).await.expect("replace");
    for now in [T0, T0 + 999, T0 + 1_000, T0 + 60_000] {
        for id in ["r1", "r2", "r3", "nope"] {
            // The view shows what `get` answers, field by field.
            let got = store.get(id, now).await.expect("get");
            let want = format!("{:?}", got.as_deref().map(TaskRecord::view));
            let mut shown = None;
            let mut show = |view: Option<crate::store::TaskView<'_>>| {
                assert!(shown.is_none(), "view_ready({id}, {now}) shows once");
                shown = Some(format!("{view:?}"));
            };
            let query = crate::store::ViewQuery {
                id,
                now_ms: now,
                show: &mut show,
            };
            if let Some(read) = store.view_ready(query) {
                read.expect("view_ready");
                assert_eq!(
                    shown.as_deref(),
                    Some(want.as_str()),
                    "view_ready({id}, {now}) must show what get answers"
                );
            }
            let Some(ready) = store.get_ready(id, now) else {
                return;
            };
            let ready = ready.expect("get_ready");
            assert_eq!(
                ready.as_deref(),
                got.as_deref(),
                "get_ready({id}, {now}) must answer as get"
            );
        }
    }
}

/// `create` never overwrites.
pub async fn create_is_insert_if_absent<S: TaskStore>(store: S) {
    store
        .create(record("dup", None, T0, None))
        .await
        .expect("create");
    let mut other = record("dup", Some("mallory"), T0, None);
    other.status = TaskStatus::Completed;
    match store.create(other).await {
        Err(Error::AlreadyExists) => {}
        other => panic!("a second create of one id must be AlreadyExists, got {other:?}"),
    }
    let got = store.get("dup", T0).await.expect("get").expect("record");
    assert_eq!(got.owner, None, "the first record must survive");
    assert_eq!(got.status, TaskStatus::Working);
}

/// `replace` writes only over the expected version.
pub async fn replace_is_compare_and_set<S: TaskStore>(store: S) {
    let r = record("cas", None, T0, Some(60_000));
    store.create(r.clone()).await.expect("create");
    let mut next = r.next_version(T0 + 5);
    next.status = TaskStatus::Completed;
    next.outcome = Some(TaskOutcome::Result(JsonText::from_value(
        &json!({"content": [], "text": "é \u{1} \"q\""}),
    )));
    store
        .replace(next.clone(), 1)
        .await
        .expect("replace at the right version");
    let got = store
        .get("cas", T0 + 5)
        .await
        .expect("get")
        .expect("record");
    assert_eq!(*got, next, "replace must store the whole new record");
    assert_eq!(got.version, 2);

    let mut stale = r.next_version(T0 + 6);
    stale.status = TaskStatus::Failed;
    match store.replace(stale, 1).await {
        Err(Error::Conflict) => {}
        other => panic!("a replace at a stale version must be Conflict, got {other:?}"),
    }
    assert_eq!(
        store
            .get("cas", T0 + 6)
            .await
            .expect("get")
            .expect("record")
            .status,
        TaskStatus::Completed,
        "a stale replace must change nothing"
    );
    match store.replace(record("ghost", None, T0, None), 0).await {
        Err(Error::NotFound) => {}
        other => panic!("replace of an unknown id must be NotFound, got {other:?}"),
    }
}

/// Expired records read as absent, are reaped in bounded batches, and
/// unlimited ones never expire.
pub async fn expired_records_are_hidden_and_reaped<S: TaskStore>(store: S) {
    for i in 0..5 {
        store
            .create(record(&format!("short{i}"), None, T0, Some(1_000)))
            .await
            .expect("create");
    }
    store
        .create(record("long", None, T0, Some(10_000)))
        .await
        .expect("create");
    store
        .create(record("forever", None, T0, None))
        .await
        .expect("create");

    assert!(
        store.get("short0", T0 + 999).await.expect("get").is_some(),
        "alive before its TTL"
    );
    assert!(
        store
            .get("short0", T0 + 1_000)
            .await
            .expect("get")
            .is_none(),
        "expired at createdAt+ttl"
    );

    let first = store.delete_expired(T0 + 1_000, 3).await.expect("reap");
    assert_eq!(first.len(), 3, "reaping must respect its limit");
    let rest = store.delete_expired(T0 + 1_000, 100).await.expect("reap");
    assert_eq!(
        rest.len(),
        2,
        "the second batch takes the remaining expired records"
    );
    let mut all: Vec<_> = first.into_iter().chain(rest).collect();
    all.sort();
    assert_eq!(all, ["short0", "short1", "short2", "short3", "short4"]);
    assert!(store
        .delete_expired(T0 + 1_000, 100)
        .await
        .expect("reap")
        .is_empty());
    assert!(store.get("long", T0 + 1_000).await.expect("get").is_some());
    assert!(
        store
            .get("forever", i64::MAX / 2)
            .await
            .expect("get")
            .is_some(),
        "ttl None never expires"
    );
    assert_eq!(
        store.delete_expired(T0 + 10_000, 100).await.expect("reap"),
        ["long"]
    );
}

/// Many writers racing on one version: exactly one wins.
pub async fn racing_replaces_have_one_winner<S: TaskStore>(store: S) {
    let store = Arc::new(store);
    let r = record("race", None, T0, None);
    store.create(r.clone()).await.expect("create");
    let mut joins = Vec::new();
    for i in 0..16 {
        let store = Arc::clone(&store);
        let mut next = r.next_version(T0 + 1);
        next.status_message = Some(format!("writer {i}"));
        joins.push(tokio::spawn(async move { store.replace(next, 1).await }));
    }
    let mut wins = 0;
    for j in joins {
        match j.await.expect("join") {
            Ok(()) => wins += 1,
            Err(Error::Conflict) => {}
            Err(e) => panic!("a losing writer must get Conflict, got {e:?}"),
        }
    }
    assert_eq!(wins, 1, "exactly one compare-and-set may win");
}

/// Whether the store lists at all ([`TaskStore::list`] is optional).
async fn lists<S: TaskStore>(store: &S) -> bool {
    match store.list(ListQuery::new(None, Era::Modern, 1, T0)).await {
        Err(Error::Unsupported(_)) => false,
        Err(e) => panic!("list failed: {e:?}"),
        Ok(_) => true,
    }
}

/// `list` returns one owner's records, newest first, paged by position.
pub async fn list_is_per_owner_newest_first<S: TaskStore>(store: S) {
    if !lists(&store).await {
        return;
    }
    for i in 0..5 {
        store
            .create(record(
                &format!("a{i}"),
                Some("alice"),
                T0 + i,
                Some(60_000),
            ))
            .await
            .expect("create");
    }
    store
        .create(record("b0", Some("bob"), T0 + 2, None))
        .await
        .expect("create");
    let page = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 2, T0 + 10))
        .await
        .expect("list");
    let ids: Vec<_> = page.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a4", "a3"], "newest first, one page");
    let last = page.last().expect("page");
    let page2 = store
        .list(
            ListQuery::new(Some("alice"), Era::Modern, 10, T0 + 10)
                .after(last.created_at_ms, &last.id),
        )
        .await
        .expect("list");
    let ids: Vec<_> = page2.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["a2", "a1", "a0"],
        "the next page continues after the cursor"
    );
    let bob = store
        .list(ListQuery::new(Some("bob"), Era::Modern, 10, T0 + 10))
        .await
        .expect("list");
    assert_eq!(bob.len(), 1, "another owner's records never appear");
    assert!(store
        .list(ListQuery::new(Some("carol"), Era::Modern, 10, T0))
        .await
        .expect("list")
        .is_empty());
    let expired = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 10, T0 + 60_002))
        .await
        .expect("list");
    let ids: Vec<_> = expired.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["a4", "a3"],
        "expired records are hidden from listings"
    );
}

/// `list` shows only the records of the owner and era asked for, however
/// the others interleave with them in time; paging by the position of each
/// page's last record (what the layer's cursor is made of) reaches every
/// one of them, once, and never a record of another owner or era.
pub async fn list_never_shows_another_owner_or_era<S: TaskStore>(store: S) {
    if !lists(&store).await {
        return;
    }
    let mut mine = Vec::new();
    for i in 0..12_i64 {
        // Half are alice's legacy records; the others are hers in the other
        // era, bob's and nobody's, two records at each time.
        let (owner, era) = match i % 4 {
            0 | 3 => (Some("alice"), Era::Legacy),
            1 => (Some("alice"), Era::Modern),
            _ => (if i % 8 == 2 { Some("bob") } else { None }, Era::Legacy),
        };
        let id = format!("r{i:02}");
        let mut r = record(&id, owner, T0 + i / 2, None);
        r.era = era;
        store.create(r).await.expect("create");
        if owner == Some("alice") && era == Era::Legacy {
            mine.push(id);
        }
    }
    mine.reverse();
    for page in [1, 2, 5] {
        let mut seen: Vec<String> = Vec::new();
        let mut after: Option<(i64, String)> = None;
        loop {
            let got = store
                .list(ListQuery {
                    after: after.as_ref().map(|(c, id)| (*c, id.as_str())),
                    ..ListQuery::new(Some("alice"), Era::Legacy, page, T0)
                })
                .await
                .expect("list");
            for r in &got {
                assert!(
                    r.owner.as_deref() == Some("alice") && r.era == Era::Legacy,
                    "list showed {} of {:?} in {:?} to alice's legacy listing",
                    r.id,
                    r.owner,
                    r.era
                );
            }
            seen.extend(got.iter().map(|r| r.id.clone()));
            match got.last() {
                Some(last) if got.len() == page => {
                    after = Some((last.created_at_ms, last.id.clone()));
                }
                _ => break,
            }
        }
        assert_eq!(seen, mine, "pages of {page}: every record of hers, once");
    }
    let modern = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 10, T0))
        .await
        .expect("list");
    let ids: Vec<_> = modern.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r09", "r05", "r01"], "the other era lists apart");
    let nobody = store
        .list(ListQuery::new(None, Era::Legacy, 10, T0))
        .await
        .expect("list");
    assert!(
        nobody.iter().all(|r| r.owner.is_none()),
        "an ownerless listing shows only ownerless records"
    );
    assert_eq!(nobody.len(), 1);
}

/// Expired records not reaped yet do not cut a page short: a page holds as
/// many live records as are left, however many newer ones expired.
pub async fn list_fills_pages_past_expired_records<S: TaskStore>(store: S) {
    if !lists(&store).await {
        return;
    }
    for i in 0..3 {
        store
            .create(record(&format!("old{i}"), Some("alice"), T0 + i, None))
            .await
            .expect("create");
    }
    for i in 0..100 {
        store
            .create(record(
                &format!("new{i:03}"),
                Some("alice"),
                T0 + 10 + i,
                Some(1_000),
            ))
            .await
            .expect("create");
    }
    let now = T0 + 5_000;
    let page = store
        .list(ListQuery::new(Some("alice"), Era::Modern, 2, now))
        .await
        .expect("list");
    let ids: Vec<_> = page.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["old2", "old1"], "a full page of the live records");
    let last = page.last().expect("page");
    let rest = store
        .list(
            ListQuery::new(Some("alice"), Era::Modern, 2, now).after(last.created_at_ms, &last.id),
        )
        .await
        .expect("list");
    let ids: Vec<_> = rest.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["old0"]);
}
