//! The operator API ([`OperatorStore`]): listings across owners and eras
//! with every filter, keyset pages that hold under concurrent writes,
//! counts, and purges that never touch an unfinished task.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::json;

use super::{ops, record, T0};
use crate::protocol::TaskStatus;
use crate::store::{Era, Lease, TaskPage, TaskQuery, TaskRecord, TaskStore, WaitingTask};

fn ids(page: &[Arc<TaskRecord>]) -> Vec<&str> {
    page.iter().map(|r| r.id.as_str()).collect()
}

/// A record of `owner`, `tool`, `status` created at `created`.
fn task(id: &str, owner: Option<&str>, tool: &str, status: TaskStatus, created: i64) -> TaskRecord {
    let mut r = record(id, owner, created, None);
    r.tool_name = tool.into();
    r.status = status;
    if status.is_terminal() {
        r.arguments = None;
    }
    r
}

async fn find<S: TaskStore>(store: &S, query: TaskQuery, now_ms: i64) -> Vec<Arc<TaskRecord>> {
    let found = ops(store).find(&query, now_ms).await.expect("find");
    assert!(found.walked_to.is_none(), "a walk this short never stops");
    found.tasks
}

async fn page<S: TaskStore>(store: &S, query: &TaskQuery, now_ms: i64) -> TaskPage {
    let found = ops(store).find(query, now_ms).await.expect("find");
    found.into_page(query.page_size())
}

/// Every owner's and era's tasks, newest first (ties by id, descending);
/// each filter alone and together; expired tasks hidden; a search only in
/// arguments stored in clear.
pub async fn operator_lists_every_task_with_filters<S: TaskStore>(store: S) {
    let now = T0 + 5_000;
    let mut a1 = task("a1", Some("alice"), "alpha", TaskStatus::Working, T0 + 1);
    a1.arguments = Some(json!({"city": "Paris"}).into());
    let mut a2 = task("a2", Some("alice"), "beta", TaskStatus::Working, T0 + 2);
    a2.era = Era::Legacy;
    a2.arguments = Some(json!({"city": "Rome"}).into());
    let records = [
        a1,
        a2,
        task(
            "b1",
            Some("bob"),
            "alpha",
            TaskStatus::InputRequired,
            T0 + 3,
        ),
        task("n1", None, "alpha", TaskStatus::Completed, T0 + 4),
        task("t1", None, "gamma", TaskStatus::Failed, T0 + 5),
        task("t2", None, "gamma", TaskStatus::Cancelled, T0 + 5),
        record("gone", Some("alice"), T0 + 6, Some(1_000)),
    ];
    for r in records {
        store.create(r).await.expect("create");
    }
    let all = find(&store, TaskQuery::new(), now).await;
    assert_eq!(
        ids(&all),
        ["t2", "t1", "n1", "b1", "a2", "a1"],
        "every live task, newest first, ties by id descending"
    );
    let cases: [(TaskQuery, &[&str]); 9] = [
        (TaskQuery::new().status(TaskStatus::InputRequired), &["b1"]),
        (
            TaskQuery::new()
                .status(TaskStatus::Working)
                .status(TaskStatus::Cancelled),
            &["t2", "a2", "a1"],
        ),
        (TaskQuery::new().tool("alpha"), &["n1", "b1", "a1"]),
        (TaskQuery::new().owner("alice"), &["a2", "a1"]),
        (
            TaskQuery::new().created_after_ms(T0 + 3),
            &["t2", "t1", "n1", "b1"],
        ),
        (TaskQuery::new().created_before_ms(T0 + 3), &["a2", "a1"]),
        (
            TaskQuery::new()
                .tool("alpha")
                .created_after_ms(T0 + 2)
                .created_before_ms(T0 + 4),
            &["b1"],
        ),
        (TaskQuery::new().owner("carol"), &[]),
        (
            TaskQuery::new().status(TaskStatus::Working).tool("alpha"),
            &["a1"],
        ),
    ];
    for (query, want) in cases {
        let got = find(&store, query.clone(), now).await;
        assert_eq!(ids(&got), want, "{query:?}");
    }
    let searched = ids(&find(&store, TaskQuery::new().search("Paris"), now).await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let want: &[&str] = if ops(&store).searches_arguments() {
        &["a1"]
    } else {
        &[]
    };
    assert_eq!(searched, want, "a search in the arguments stored in clear");
    assert!(
        find(&store, TaskQuery::new().search("\"a\":1"), now)
            .await
            .iter()
            .all(|r| r.id == "b1"),
        "a finished task's arguments are gone, and so is its match"
    );
    let early = find(&store, TaskQuery::new(), T0 + 10).await;
    assert_eq!(early[0].id, "gone", "a task is listed until it expires");
}

/// Keyset pages: each page starts strictly after the cursor of the one
/// before, and the last full page's cursor leads to an empty one.
pub async fn operator_pages_by_cursor<S: TaskStore>(store: S) {
    for i in 0..7 {
        let owner = ["alice", "bob"][i % 2];
        let r = task(
            &format!("p{i}"),
            Some(owner),
            "t",
            TaskStatus::Working,
            T0 + (i as i64) / 2,
        );
        store.create(r).await.expect("create");
    }
    let mut query = TaskQuery::new().limit(3);
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = page(&store, &query, T0).await;
        pages += 1;
        seen.extend(page.tasks.iter().map(|r| r.id.clone()));
        let Some(next) = page.next else { break };
        let text = next.to_string();
        query = query.after(text.parse().expect("a cursor reads back"));
    }
    assert_eq!(seen, ["p6", "p5", "p4", "p3", "p2", "p1", "p0"]);
    assert_eq!(pages, 3);
}

/// Pages read while other writers create newer tasks and finish listed
/// ones show every task that existed before the first page exactly once,
/// in order.
pub async fn operator_pages_stay_stable_under_concurrent_writes<S: TaskStore>(store: S) {
    let mut before = BTreeSet::new();
    for i in 0..40 {
        let id = format!("old{i:02}");
        let r = task(&id, Some("alice"), "t", TaskStatus::Working, T0 + i);
        store.create(r).await.expect("create");
        before.insert(id);
    }
    let pager = async {
        let mut query = TaskQuery::new().limit(6);
        let mut seen: Vec<Arc<TaskRecord>> = Vec::new();
        loop {
            let page = page(&store, &query, T0 + 100).await;
            seen.extend(page.tasks);
            let Some(next) = page.next else { return seen };
            query = query.after(next);
            tokio::task::yield_now().await;
        }
    };
    let writer = async {
        for i in 0..40 {
            let newer = task(
                &format!("new{i:02}"),
                None,
                "t",
                TaskStatus::Working,
                T0 + 50 + i,
            );
            store.create(newer).await.expect("create");
            let id = format!("old{:02}", 39 - i);
            let old = store
                .get(&id, T0 + 100)
                .await
                .expect("get")
                .expect("record");
            let mut done = old.next_version(T0 + 100);
            done.status = TaskStatus::Completed;
            done.arguments = None;
            store.replace(done, old.version).await.expect("replace");
            tokio::task::yield_now().await;
        }
    };
    let (seen, ()) = tokio::join!(pager, writer);
    let positions: Vec<(i64, &str)> = seen
        .iter()
        .map(|r| (r.created_at_ms, r.id.as_str()))
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] > w[1]),
        "pages in order, none shown twice: {positions:?}"
    );
    let old: BTreeSet<String> = seen
        .iter()
        .filter(|r| r.id.starts_with("old"))
        .map(|r| r.id.clone())
        .collect();
    assert_eq!(old, before, "every task that existed, exactly once");
}

/// Counts by status (expired tasks left out), the queue and its oldest
/// task, the `input_required` tasks waiting longest, and the tasks under a
/// live lease by holder.
pub async fn operator_counts_tasks_and_waits<S: TaskStore>(store: S) {
    let now = T0 + 10_000;
    let leased = |id: &str, holder: &str, until_ms: i64| {
        let mut r = task(id, Some("alice"), "t", TaskStatus::Working, T0);
        r.lease = Some(Lease {
            holder: holder.into(),
            fence: 1,
            until_ms,
        });
        r
    };
    let mut asking_late = task("ask2", None, "t", TaskStatus::InputRequired, T0);
    asking_late.updated_at_ms = T0 + 7;
    let mut asking_early = task("ask1", None, "t", TaskStatus::InputRequired, T0);
    asking_early.updated_at_ms = T0 + 4;
    let mut expired = task("old", None, "t", TaskStatus::Completed, T0);
    expired.ttl_ms = Some(1_000);
    let records = [
        leased("run1", "replica-a", now + 30_000),
        leased("run2", "replica-a", now),
        leased("run3", "replica-b", now + 1),
        leased("dead", "replica-c", now - 1),
        leased("q1", Lease::QUEUED, T0 + 4),
        leased("q2", Lease::QUEUED, T0 + 2),
        asking_late,
        asking_early,
        task("c", None, "t", TaskStatus::Completed, T0),
        task("f", None, "t", TaskStatus::Failed, T0),
        task("x", None, "t", TaskStatus::Cancelled, T0),
        expired,
    ];
    for r in records {
        store.create(r).await.expect("create");
    }
    let stats = ops(&store).stats(now).await.expect("stats");
    let counts: Vec<u64> = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ]
    .into_iter()
    .map(|s| stats.count(s))
    .collect();
    assert_eq!(counts, [6, 2, 1, 1, 1], "live tasks by status: {stats:?}");
    assert_eq!(stats.queued, 2);
    let waiting = |id: &str, since_ms| {
        Some(WaitingTask {
            id: id.into(),
            since_ms,
        })
    };
    assert_eq!(
        stats.oldest_queued,
        waiting("q2", T0 + 3),
        "queued at lease end + 1"
    );
    assert_eq!(stats.oldest_input_required, waiting("ask1", T0 + 4));
    let longest: Vec<(&str, i64)> = stats
        .longest_input_required
        .iter()
        .map(|w| (w.id.as_str(), w.since_ms))
        .collect();
    assert_eq!(
        longest,
        [("ask1", T0 + 4), ("ask2", T0 + 7)],
        "the waiting tasks, longest first"
    );
    if let Some(w) = &stats.oldest_input_required {
        let waited = u64::try_from(now - (T0 + 4)).unwrap_or(0);
        assert_eq!(stats.waited(w), std::time::Duration::from_millis(waited));
    }
    let running: Vec<(&str, u64)> = stats
        .running_by_holder
        .iter()
        .map(|(h, n)| (h.as_str(), *n))
        .collect();
    assert_eq!(
        running,
        [("replica-a", 2), ("replica-b", 1)],
        "live leases only"
    );
    let empty = ops(&store).stats(now + 1_000_000_000).await.expect("stats");
    assert_eq!(empty.oldest_input_required, waiting("ask1", T0 + 4));
}

/// A purge deletes only terminal tasks matching its query, at most a page
/// of them, and reports how many.
pub async fn operator_purges_only_finished_tasks<S: TaskStore>(store: S) {
    let now = T0 + 1_000;
    let records = [
        task(
            "done-old",
            Some("alice"),
            "alpha",
            TaskStatus::Completed,
            T0,
        ),
        task("fail-old", Some("bob"), "beta", TaskStatus::Failed, T0 + 1),
        task(
            "run-old",
            Some("alice"),
            "alpha",
            TaskStatus::Working,
            T0 + 2,
        ),
        task("ask-old", None, "alpha", TaskStatus::InputRequired, T0 + 3),
        task("stop-new", None, "alpha", TaskStatus::Cancelled, T0 + 500),
        task("done-new", None, "beta", TaskStatus::Completed, T0 + 501),
    ];
    for r in records {
        store.create(r).await.expect("create");
    }
    let o = ops(&store);
    let unfinished = TaskQuery::new().status(TaskStatus::Working);
    assert_eq!(o.purge(&unfinished, now).await.expect("purge").deleted, 0);
    let one = TaskQuery::new().created_before_ms(T0 + 100).limit(1);
    assert_eq!(
        o.purge(&one, now).await.expect("purge").deleted,
        1,
        "a page at most"
    );
    let old = TaskQuery::new().created_before_ms(T0 + 100);
    assert_eq!(o.purge(&old, now).await.expect("purge").deleted, 1);
    let tool = TaskQuery::new().tool("beta");
    assert_eq!(o.purge(&tool, now).await.expect("purge").deleted, 1);
    for gone in ["done-old", "fail-old", "done-new"] {
        assert!(
            store.get(gone, now).await.expect("get").is_none(),
            "{gone} purged"
        );
    }
    let left = find(&store, TaskQuery::new(), now).await;
    assert_eq!(ids(&left), ["stop-new", "ask-old", "run-old"]);
}
