//! See it work: a tool call becomes a task, asks for input, is answered,
//! resumes from the top and completes, all in one process.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::convert::Infallible;
use std::time::{Duration, Instant};

use mcp_task_layer::{
    resolve_poll_interval, DetailedTask, JsonRpcRequest, JsonRpcResponse, MemoryStore, TaskLayer,
    TaskPolicy, TaskPollDecision, TaskResumeContext,
};
use serde_json::{json, Value};
use tower::{service_fn, ServiceBuilder, ServiceExt};

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

fn request(id: i64, method: &str, mut params: Value) -> JsonRpcRequest {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
    });
    JsonRpcRequest::new(id, method, params)
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
    let at = || format!("{:>7.3}s", start.elapsed().as_secs_f64());

    let created = server
        .clone()
        .oneshot(request(
            1,
            "tools/call",
            json!({"name": "deploy", "arguments": {"version": "v2"}}),
        ))
        .await
        .unwrap();
    let created = created.result_value().unwrap().clone();
    let task_id = created["taskId"]
        .as_str()
        .expect("the call became a task")
        .to_owned();
    println!(
        "{}  tools/call → resultType {} ({} after the 100 ms budget)",
        at(),
        created["resultType"],
        created["status"]
    );
    println!("           task id {task_id}");

    let mut last_status = String::new();
    let mut id = 2;
    loop {
        id += 1;
        let resp = server
            .clone()
            .oneshot(request(id, "tasks/get", json!({"taskId": task_id})))
            .await
            .unwrap();
        let task: DetailedTask =
            serde_json::from_value(resp.result_value().unwrap().clone()).unwrap();
        let status = task.status().to_string();
        if status != last_status {
            println!("{}  tasks/get  → {status}", at());
            last_status = status;
        }
        match task.poll_decision() {
            TaskPollDecision::Terminal { .. } => {
                let result = task.result().expect("completed");
                println!("{}  result: {}", at(), result["content"][0]["text"]);
                break;
            }
            TaskPollDecision::InputRequired => {
                for (key, req) in task.input_requests().unwrap() {
                    let message = req
                        .params
                        .as_ref()
                        .and_then(|p| p["message"].as_str())
                        .unwrap_or("");
                    println!(
                        "{}  input requested under {key:?}: {message} → answering yes",
                        at()
                    );
                    id += 1;
                    let ack = server
                        .clone()
                        .oneshot(request(id, "tasks/update", json!({
                            "taskId": task_id,
                            "inputResponses": {key: {"action": "accept", "content": {"approved": true}}}
                        })))
                        .await
                        .unwrap();
                    println!("{}  tasks/update → {}", at(), ack.result_value().unwrap());
                }
            }
            TaskPollDecision::InProgress { poll_hint } => {
                let wait = resolve_poll_interval(
                    None,
                    poll_hint,
                    Duration::from_secs(1),
                    Duration::from_millis(50),
                );
                tokio::time::sleep(wait).await;
            }
            _ => unreachable!("no other decision exists today"),
        }
    }
}
