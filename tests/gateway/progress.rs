//! The `progressToken` the gateway puts on an upstream call: only where the
//! call's progress has somewhere to go.

use mcp_task_layer::TaskPolicy;
use serde_json::json;

use crate::common;
use crate::harness::{events, events_file, python, text, Gateway};

/// A synchronous call of a client that asked for no progress goes upstream
/// without a token (its progress would reach no one); a call that may
/// become a task, and a synchronous call with the client's own token, go
/// with the gateway's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_asks_for_progress_only_where_it_has_somewhere_to_go() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let auto = TaskPolicy::Auto {
        within: std::time::Duration::from_secs(5),
    };
    let gw = Gateway::start(up, &[("greet", TaskPolicy::Sync), ("long", auto)]).await;
    let r = gw.call("greet", json!({ "name": "Ada" })).await;
    assert_eq!(text(&r), "Hello, Ada!");
    let peer = mcp_task_layer::Peer::new(common::peer::TestPeer::default());
    let r = gw
        .send_with_peer(
            "tools/call",
            json!({ "name": "greet", "arguments": { "name": "Bo" }, "_meta": { "progressToken": 9 } }),
            peer,
        )
        .await;
    assert!(!r.is_error(), "{r:?}");
    let r = gw.call("long", json!({ "seconds": 0.1, "steps": 1 })).await;
    assert_eq!(text(&r), "done after 1 steps");
    let asked: Vec<String> = events(&file)
        .into_iter()
        .filter(|l| l.starts_with("progress "))
        .collect();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[0], "progress None");
    assert!(asked[1].starts_with("progress mcp-tasks-"), "{asked:?}");
    assert!(asked[2].starts_with("progress mcp-tasks-"), "{asked:?}");
}

/// An upstream that reports progress fast to a client that reads nothing:
/// what waits for the client is bounded (one task, a short queue, the
/// rest dropped) and the call still ends. Before, each notification was a
/// task of its own, waiting for ever: 300 reports, 300 tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_for_a_client_that_reads_nothing_is_bounded() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let gw = Gateway::start(up, &[("long", TaskPolicy::Sync)]).await;
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();
    let r = gw
        .send_with_peer(
            "tools/call",
            json!({ "name": "long", "arguments": { "seconds": 1, "steps": 300 }, "_meta": { "progressToken": "p" } }),
            mcp_task_layer::Peer::new(crate::common::peer::Unresponsive),
        )
        .await;
    assert_eq!(
        crate::harness::text(crate::common::ok(&r)),
        "done after 300 steps"
    );
    let grown = tasks().saturating_sub(before);
    assert!(grown < 20, "{grown} more tasks alive after the call");
}
