//! What the binary's tests share: a fixture MCP server, and starting its
//! tools as tasks through a `TaskLayer` that writes the store the binary
//! reads.
#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_task_layer::{
    CancellationToken, JsonRpcRequest, JsonRpcResponse, Params, TaskLayer, TaskOwner, TaskStatus,
};
use serde_json::{json, Value};
use tower::{Service, ServiceExt};

/// The tools: `hang` runs until cancelled, `ask` asks a question, `done`
/// answers; each works a moment first, so that it becomes a task.
pub(crate) fn server(
    stopped: Arc<AtomicUsize>,
) -> impl Service<JsonRpcRequest, Response = JsonRpcResponse, Error = Infallible, Future: Send>
       + Clone
       + Send
       + 'static {
    tower::service_fn(move |req: JsonRpcRequest| {
        let stopped = Arc::clone(&stopped);
        async move {
            let params = req.params.clone().map_or(Value::Null, Params::into_value);
            let token = req
                .extensions
                .get::<CancellationToken>()
                .cloned()
                .unwrap_or_default();
            tokio::task::yield_now().await;
            let result = match params["name"].as_str() {
                Some("hang") => {
                    token.cancelled().await;
                    stopped.fetch_add(1, Ordering::SeqCst);
                    json!({ "resultType": "complete", "content": [] })
                }
                Some("ask") => json!({
                    "resultType": "input_required",
                    "inputRequests": { "name": { "method": "elicitation/create", "params": {
                        "mode": "form", "message": "Your name?",
                        "requestedSchema": { "type": "object", "properties": {} } } } }
                }),
                _ => {
                    json!({ "resultType": "complete", "content": [{ "type": "text", "text": "ok" }] })
                }
            };
            Ok(JsonRpcResponse::result(req.id, result))
        }
    })
}

/// Start `tool` as `owner`'s task; its id.
pub(crate) async fn start<S>(svc: &S, owner: &str, tool: &str, args: Value) -> String
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse, Error = Infallible> + Clone,
{
    let params = json!({
        "name": tool,
        "arguments": args,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "test", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": { "io.modelcontextprotocol/tasks": {} },
                "elicitation": { "form": {} }
            }
        }
    });
    let mut req = JsonRpcRequest::new(1, "tools/call", params);
    req.extensions.insert(TaskOwner::new(owner));
    let resp = svc.clone().oneshot(req).await.expect("infallible");
    let result = resp.result_value().expect("a result");
    assert_eq!(result["resultType"], "task", "{tool}: {result}");
    result["taskId"].as_str().expect("a task id").to_owned()
}

/// Poll (bounded) until `id` is in `status`, as the library reads it.
pub(crate) async fn until_status(layer: &TaskLayer, id: &str, status: TaskStatus) {
    let operator = layer.operator();
    for _ in 0..1_000 {
        let found = operator.get(id).await.expect("get");
        if found.is_some_and(|t| t.status == status) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{id} never reached {status}");
}
