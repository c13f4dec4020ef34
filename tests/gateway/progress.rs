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
