//! Pages of a rare match: a store that walks an index for a filter reads at
//! most [`WALK_BUDGET`] records for one page and says where it stopped; a
//! store with an index of the filter answers at once. Either way, following
//! the pages finds every match exactly once, newest first, and a page
//! whose walk stopped holds fewer tasks than asked for. A walk ends where
//! the query's span of creation times ends.

use serde_json::json;

use super::{ops, record, T0};
use crate::store::{Era, TaskQuery, TaskRecord, TaskStore, WALK_BUDGET};

/// Two tasks hold a rare word, more than [`WALK_BUDGET`] tasks apart: every
/// page's walk is bounded, and the pages together find both, in order,
/// once each. Returns how many pages the search took (1 for a store that
/// reads an index of the search, more for one that walks). A store that
/// cannot search its arguments (sealed at rest) is asked for the two
/// tasks' rare tool instead.
pub async fn operator_pages_of_rare_matches_are_bounded<S: TaskStore>(store: S) -> usize {
    let between = WALK_BUDGET + 10;
    let now = T0 + between as i64 + 10;
    let rare = |id: &str, at: i64| {
        TaskRecord::new(id, Era::Modern, "rare", json!({"w": "zebra"}), at, None)
    };
    store.create(rare("old", T0)).await.expect("create");
    for i in 1..=between {
        let r = record(&format!("f{i:05}"), None, T0 + i as i64, None);
        store.create(r).await.expect("create");
    }
    store
        .create(rare("new", T0 + between as i64 + 1))
        .await
        .expect("create");

    let mut query = if ops(&store).searches_arguments() {
        TaskQuery::new().search("zebra")
    } else {
        TaskQuery::new().tool("rare")
    }
    .limit(10);
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let found = ops(&store).find(&query, now).await.expect("find");
        pages += 1;
        assert!(pages <= between, "the pages never reach the end");
        if found.walked_to.is_some() {
            assert!(found.tasks.len() < 10, "a walk stops only short of a page");
        }
        seen.extend(found.tasks.iter().map(|r| r.id.clone()));
        let page = found.into_page(query.page_size());
        let Some(next) = page.next else { break };
        query = query.after(next);
    }
    assert_eq!(seen, ["new", "old"], "every match once, newest first");

    // A span of creation times bounds a walk too: the few tasks at either
    // end of the table are one page, the last (not a walk past the span
    // that finds nothing, page after page, down the rest of the table).
    let newest_filler = format!("f{between:05}");
    for (query, want) in [
        (
            TaskQuery::new().created_after_ms(T0 + between as i64),
            ["new", newest_filler.as_str()],
        ),
        (
            TaskQuery::new().created_before_ms(T0 + 2),
            ["f00001", "old"],
        ),
    ] {
        let found = ops(&store).find(&query.limit(10), now).await.expect("find");
        let ids: Vec<&str> = found.tasks.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, want, "the span's tasks, newest first");
        assert!(found.into_page(10).next.is_none(), "and no page after them");
    }
    pages
}
