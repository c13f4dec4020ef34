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

/// An upstream over stdio that answers each `tools/call` with a progress
/// report, a log message and its result in one write (no SDK: the
/// fixture's Python alone).
const ALL_AT_ONCE: &str = r#"
import json, sys
def send(*messages):
    sys.stdout.write("".join(json.dumps(m) + "\n" for m in messages))
    sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    method, i = m["method"], m["id"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "at-once", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": "at_once", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        token = m["params"].get("_meta", {}).get("progressToken")
        send({"jsonrpc": "2.0", "method": "notifications/progress",
              "params": {"progressToken": token, "progress": 1, "total": 1, "message": "last step"}},
             {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "last words"}},
             {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "done"}]}})
    else:
        send({"jsonrpc": "2.0", "id": i, "result": {}})
"#;

/// What the upstream said right before its answer (a last progress
/// report, a log message, in the same write) reaches the client, before
/// the answer does (the answer may end the client's stream). Before, the
/// answer was taken first and what came with it was dropped.
#[tokio::test(flavor = "current_thread")]
async fn what_the_upstream_says_with_its_answer_reaches_the_client_first() {
    let Some(python) = common::server_url(
        "MCP_TASKS_PYTHON",
        "Python with the mcp package",
        ".ci/python.sh: ensure_python_mcp",
    ) else {
        return;
    };
    let up = mcp_task_layer::gateway::UpstreamTarget::Command {
        program: python,
        args: vec!["-c".into(), ALL_AT_ONCE.into()],
    };
    let gw = Gateway::start(up, &[("at_once", TaskPolicy::Sync)]).await;
    let peer = common::peer::TestPeer::default();
    let sent = std::sync::Arc::clone(&peer.sent);
    let r = gw
        .send_with_peer(
            "tools/call",
            json!({ "name": "at_once", "arguments": {}, "_meta": { "progressToken": "p" } }),
            mcp_task_layer::Peer::new(peer),
        )
        .await;
    assert_eq!(text(common::ok(&r)), "done");
    let methods: Vec<String> = sent
        .lock()
        .unwrap()
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    assert_eq!(
        methods,
        ["notifications/progress", "notifications/message"],
        "what reached the client before the answer"
    );
}
