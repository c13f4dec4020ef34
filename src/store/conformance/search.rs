//! The operator's search in the arguments ([`TaskQuery::search`]): the
//! exact text, wherever it occurs, whatever characters it holds (the SQL
//! stores read an index of patterns, whose wildcards must not leak), and
//! only while the arguments are stored in clear.

use serde_json::json;

use super::{ops, record, T0};
use crate::protocol::TaskStatus;
use crate::store::{TaskQuery, TaskStore};

async fn found<S: TaskStore>(store: &S, text: &str, now_ms: i64) -> Vec<String> {
    let found = ops(store)
        .find(&TaskQuery::new().search(text), now_ms)
        .await
        .expect("find");
    found.tasks.iter().map(|r| r.id.clone()).collect()
}

/// A search matches the text exactly: case-sensitive, wildcard
/// characters of SQL (`%`, `_`, `\`) and of globs (`*`, `?`, `[`) as
/// themselves, texts shorter than an index's trigrams, and text outside
/// ASCII; a task holding NUL is searched like any other. A task's match
/// ends when its arguments are dropped (it finished) and when it is
/// deleted.
pub async fn operator_search_matches_exact_text<S: TaskStore>(store: S) {
    let now = T0 + 5_000;
    let args = [
        ("s1", json!({"note": "50% off_now"})),
        ("s2", json!({"note": "500 offXnow"})),
        ("s3", json!({"glob": "x*y? [z] back\\slash"})),
        ("s4", json!({"glob": "xay! z back/slash"})),
        ("s5", json!({"city": "Zürich", "Case": "Paris"})),
        ("s6", json!({"city": "Zurich", "case": "paris"})),
        // NUL, which PostgreSQL's JSON operators refuse to read.
        ("s7", json!({"nul": "a\u{0}b"})),
    ];
    for (i, (id, a)) in args.iter().enumerate() {
        // s6 expires between the searches and the reap below.
        let ttl = (*id == "s6").then_some(6_000);
        let mut r = record(id, Some("alice"), T0 + i as i64, ttl);
        if *id == "s7" {
            r.tool_name = "nul\u{0}tool".into();
        }
        r.arguments = Some(a.clone().into());
        store.create(r).await.expect("create");
    }
    if !ops(&store).searches_arguments() {
        assert!(
            found(&store, "Paris", now).await.is_empty(),
            "sealed arguments never match"
        );
        return;
    }
    let cases: [(&str, &[&str]); 15] = [
        ("50% off_", &["s1"]),
        ("%", &["s1"]),
        ("_", &["s1"]),
        ("off_now", &["s1"]),
        ("x*y?", &["s3"]),
        ("[z]", &["s3"]),
        ("*", &["s3"]),
        ("back\\\\slash", &["s3"]),
        ("Zürich", &["s5"]),
        ("ür", &["s5"]),
        ("Paris", &["s5"]),
        ("paris", &["s6"]),
        ("\"Case\":\"Paris\"", &["s5"]),
        ("nowhere", &[]),
        ("a\\u0000b", &["s7"]),
    ];
    for (text, want) in cases {
        let mut got = found(&store, text, now).await;
        got.sort();
        assert_eq!(got, want, "search {text:?}");
    }

    // s5 finishes: its arguments are dropped, and its match with them.
    let s5 = store.get("s5", now).await.expect("get").expect("s5");
    let mut done = s5.next_version(now);
    done.status = TaskStatus::Completed;
    done.arguments = None;
    store.replace(done, s5.version).await.expect("replace");
    assert!(
        found(&store, "Zürich", now).await.is_empty(),
        "a finished task's arguments are gone, and its match with them"
    );
    // s6 expires and is reaped: no match remains behind.
    let later = now + 10_000;
    store.delete_expired(later, 100).await.expect("reap");
    assert!(
        found(&store, "paris", later).await.is_empty(),
        "a deleted task is never found"
    );
    assert_eq!(found(&store, "off_now", later).await, ["s1"]);
}
