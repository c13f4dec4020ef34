//! The gateway in front of `@modelcontextprotocol/server-everything`, the
//! reference server of the TypeScript SDK, over stdio.

use std::time::Duration;

use mcp_task_layer::TaskPolicy;
use serde_json::json;

use crate::common;
use crate::harness::{everything, text, Gateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_gets_tasks_with_progress_and_elicitation() {
    let Some(up) = everything() else { return };
    let gw = Gateway::start(
        up,
        &[
            ("echo", TaskPolicy::Sync),
            (
                "trigger-long-running-operation",
                TaskPolicy::Auto {
                    within: Duration::from_millis(200),
                },
            ),
            ("trigger-elicitation-request", TaskPolicy::Task),
        ],
    )
    .await;

    let r = gw.call("echo", json!({ "message": "hi" })).await;
    assert_eq!(r["resultType"], "complete");
    assert!(text(&r).contains("hi"), "{r}");

    progress_and_elicitation(&gw).await;
}

/// server-everything's long operation as a task whose progress ("k of n":
/// it sends no message) is the statusMessage, and its elicitation tool
/// (registered because the gateway declares the capability) asking through
/// the task, whichever transport reaches it.
pub(crate) async fn progress_and_elicitation(gw: &Gateway) {
    let r = gw
        .call(
            "trigger-long-running-operation",
            json!({ "duration": 2, "steps": 4 }),
        )
        .await;
    assert_eq!(r["resultType"], "task", "{r}");
    let task = r["taskId"].as_str().unwrap().to_owned();
    gw.poll(&task, "a progress message", |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.ends_with(" of 4"))
    })
    .await;
    let t = gw.status(&task, "completed").await;
    assert!(text(&t["result"]).contains("completed"), "{t}");

    // Its elicitation tool (registered because the gateway declares the
    // capability) asks through the task.
    let tools = gw.send26("tools/list", json!({}), true).await;
    assert!(
        common::ok(&tools)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "trigger-elicitation-request"),
        "{}",
        common::ok(&tools)
    );
    let r = gw.call("trigger-elicitation-request", json!({})).await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    let t = gw.status(&task, "input_required").await;
    let key = crate::harness::first_question(&t);
    gw.send26(
        "tasks/update",
        json!({ "taskId": task, "inputResponses": { key: { "action": "accept", "content": { "name": "Ada" } } } }),
        true,
    )
    .await;
    let t = gw.status(&task, "completed").await;
    assert!(t["result"].to_string().contains("Ada"), "{t}");
}
