//! See it work: a tool call becomes a task, asks for input, is answered,
//! resumes from the top and completes, all in one process.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::convert::Infallible;
use std::time::{Duration, Instant};

use mcp_task_layer::client::{resolve_poll_interval, Started, TaskClient};
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, MemoryStore, TaskLayer, TaskPolicy, TaskPollDecision,
    TaskResumeContext, TaskStatus,
};
use serde_json::json;
use tower::{service_fn, ServiceBuilder};

/// The user's MCP server. It knows nothing about tasks: `deploy` works a
/// little, asks for approval MRTR-style, and finishes once approved.
async fn mcp_server(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let params = req.params.clone().unwrap_or_default();
    let answer = params["inputResponses"]["approve"]["content"]["approved"].as_bool();
    let resumed = req.extensions.get::<TaskResumeContext>().is_some();
    let result = match (req.method.as_str(), answer) {
        ("tools/call", None) => {
            println!("           handler: building the release (resumed: {resumed})");
            tokio::time::sleep(Duration::from_millis(400)).await;
            json!({
                "resultType": "input_required",
                "inputRequests": {"approve": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": "Deploy v2 to production?",
                    "requestedSchema": {"type": "object", "properties": {"approved": {"type": "boolean"}}}
                }}}
            })
        }
        ("tools/call", Some(approved)) => {
            println!(
                "           handler: re-run from the top with the answer (resumed: {resumed})"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
            let text = if approved {
                "v2 is live"
            } else {
                "deployment skipped"
            };
            json!({"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": false})
        }
        _ => json!({"resultType": "complete"}),
    };
    Ok(JsonRpcResponse::result(req.id, result))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = ServiceBuilder::new()
        .layer(
            TaskLayer::new(MemoryStore::new())
                .with_tool_policy(
                    "deploy",
                    TaskPolicy::Auto {
                        within: Duration::from_millis(100),
                    },
                )
                .with_poll_interval(Duration::from_millis(150)),
        )
        .service(service_fn(mcp_server));
    let start = Instant::now();
    let at = move || format!("{:>7.3}s", start.elapsed().as_secs_f64());

    // The client half. `TaskClient::call_tool` would do all of the below in
    // one call; the steps are spelled out to show each state.
    let client = TaskClient::new(server).with_capability("elicitation", json!({}));
    let Started::Task { task_id, .. } = client
        .start_tool("deploy", json!({"version": "v2"}))
        .await
        .expect("tools/call")
    else {
        panic!("deploy finished within its budget; expected a task");
    };
    println!(
        "{}  tools/call → a task (still working after the 100 ms budget)",
        at()
    );
    println!("           task id {task_id}");

    let mut last = None;
    loop {
        let (task, decision) = client.poll(&task_id).await.expect("tasks/get");
        if last != Some(task.status()) {
            println!("{}  tasks/get  → {}", at(), task.status());
            last = Some(task.status());
        }
        match decision {
            TaskPollDecision::InProgress { poll_hint } => {
                let wait = resolve_poll_interval(
                    None,
                    poll_hint,
                    Duration::from_secs(1),
                    Duration::from_millis(50),
                );
                tokio::time::sleep(wait).await;
            }
            TaskPollDecision::InputRequired => {
                let mut answers = serde_json::Map::new();
                for (key, req) in task.input_requests().into_iter().flatten() {
                    let message = req
                        .params
                        .as_ref()
                        .and_then(|p| p["message"].as_str())
                        .unwrap_or("");
                    println!(
                        "{}  input requested under {key:?}: {message} → answering yes",
                        at()
                    );
                    answers.insert(
                        key.clone(),
                        json!({"action": "accept", "content": {"approved": true}}),
                    );
                }
                client
                    .answer(&task_id, answers)
                    .await
                    .expect("tasks/update");
                println!("{}  tasks/update → acknowledged", at());
            }
            TaskPollDecision::Terminal {
                status: TaskStatus::Completed,
            } => {
                let (task, _) = client.poll(&task_id).await.expect("tasks/get");
                println!(
                    "{}  result: {}",
                    at(),
                    task.result().expect("completed")["content"][0]["text"]
                );
                break;
            }
            TaskPollDecision::Terminal { status } => {
                println!("{}  ended {status}", at());
                break;
            }
            _ => unreachable!("no other decision exists today"),
        }
    }
}
