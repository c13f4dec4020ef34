//! `TaskHandle::start_task_now`: a handler that asks a question within its
//! `Auto` budget can make the call a task at once, so that the question is
//! the task's first input request instead of a plain MRTR result (what a
//! proxy whose upstream asks early needs; see `gateway`).

mod common;

use std::convert::Infallible;
use std::time::Duration;

use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, MemoryStore, TaskHandle, TaskLayer, TaskPolicy,
};
use serde_json::{json, Value};
use tower::{ServiceBuilder, ServiceExt};

async fn server(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let name = req
        .params_object()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let answered = req
        .params_object()
        .is_some_and(|p| p.contains_key("inputResponses"));
    if answered {
        return Ok(JsonRpcResponse::result(
            req.id,
            json!({ "resultType": "complete", "content": [{ "type": "text", "text": "thanks" }] }),
        ));
    }
    if name == "promote" {
        if let Some(task) = req.extensions.get::<TaskHandle>() {
            task.start_task_now();
        }
    }
    Ok(JsonRpcResponse::result(
        req.id,
        json!({
            "resultType": "input_required",
            "inputRequests": { "q": { "method": "elicitation/create", "params": {
                "mode": "form", "message": "Name?",
                "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } } } } }
        }),
    ))
}

async fn call(layer: &TaskLayer, method: &str, params: Value) -> Value {
    let svc = ServiceBuilder::new()
        .layer(layer.clone())
        .service(tower::service_fn(server));
    let mut params = params;
    params["_meta"] = common::meta(true);
    let resp = svc
        .oneshot(JsonRpcRequest::new(1, method, params))
        .await
        .unwrap();
    common::ok(&resp).clone()
}

#[tokio::test]
async fn a_question_after_start_task_now_is_the_tasks_first_input_request() {
    let layer = TaskLayer::new(MemoryStore::new()).with_default_policy(TaskPolicy::Auto {
        within: Duration::from_secs(30),
    });
    // Without it: a plain MRTR result within the budget (R3).
    let plain = call(
        &layer,
        "tools/call",
        json!({ "name": "plain", "arguments": {} }),
    )
    .await;
    assert_eq!(plain["resultType"], "input_required");
    assert!(plain.get("taskId").is_none());

    // With it: a task at once, not after 30 s, waiting for the answer.
    let created = call(
        &layer,
        "tools/call",
        json!({ "name": "promote", "arguments": {} }),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let mut got = Value::Null;
    for _ in 0..200 {
        got = call(&layer, "tasks/get", json!({ "taskId": task })).await;
        if got["status"] == "input_required" {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(got["status"], "input_required", "{got}");
    assert_eq!(got["inputRequests"]["q"]["params"]["message"], "Name?");
    call(&layer, "tasks/update", json!({ "taskId": task, "inputResponses": { "q": { "action": "accept", "content": { "name": "Bo" } } } })).await;
    for _ in 0..200 {
        got = call(&layer, "tasks/get", json!({ "taskId": task })).await;
        if got["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(got["result"]["content"][0]["text"], "thanks", "{got}");
}
