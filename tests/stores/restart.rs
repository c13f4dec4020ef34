//! A layer over a SQLite file runs tasks, is dropped, and a new layer over
//! the same file serves them: the finished one reads back the same, and the
//! one waiting for input completes when answered.

use std::convert::Infallible;
use std::time::Duration;

use mcp_task_layer::store::SqliteStore;
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, TaskLayer, TaskOwner, TaskPolicy, TaskService,
};
use serde_json::{json, Value};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

type Inner = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// `ask`: works 1 ms, then asks for `name` until it has it and greets.
fn server() -> Inner {
    BoxCloneSyncService::new(tower::service_fn(|req: JsonRpcRequest| async move {
        let params = req
            .params
            .clone()
            .map_or(Value::Null, mcp_task_layer::Params::into_value);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let name = params["inputResponses"]["name"]["content"]["name"].as_str();
        let result = match name {
            Some(name) => json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": format!("Hello, {name}!")}]
            }),
            None => json!({
                "resultType": "input_required",
                "inputRequests": {"name": {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": "Your name?", "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"]
                    }}
                }},
                "requestState": "asked"
            }),
        };
        Ok(JsonRpcResponse::result(req.id, result))
    }))
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
    })
}

struct Client {
    svc: TaskService<Inner>,
    next: i64,
}

impl Client {
    fn new(store: SqliteStore) -> Self {
        let layer = TaskLayer::new(store).with_default_policy(TaskPolicy::Task);
        Client {
            svc: layer.layer(server()),
            next: 1,
        }
    }

    async fn send(&mut self, method: &str, mut params: Value) -> Value {
        params["_meta"] = meta();
        self.next += 1;
        let mut req = JsonRpcRequest::new(self.next, method, params);
        req.extensions.insert(TaskOwner::new("alice"));
        let resp = self.svc.clone().oneshot(req).await.unwrap();
        match resp.into_payload() {
            Ok(v) => v,
            Err(e) => panic!("{method} failed: {e:?}"),
        }
    }

    async fn start(&mut self) -> String {
        let r = self
            .send("tools/call", json!({"name": "ask", "arguments": {"x": 1}}))
            .await;
        assert_eq!(r["resultType"], "task", "{r}");
        r["taskId"].as_str().unwrap().to_owned()
    }

    async fn get(&mut self, id: &str) -> Value {
        self.send("tasks/get", json!({"taskId": id})).await
    }

    /// Poll (real time: the store is a file) until `status`.
    async fn wait_for(&mut self, id: &str, status: &str) -> Value {
        for _ in 0..500 {
            let body = self.get(id).await;
            if body["status"] == status {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id} never reached {status}");
    }

    async fn answer(&mut self, id: &str, name: &str) {
        self.send(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {
                "name": {"action": "accept", "content": {"name": name}}
            }}),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_layer_on_the_same_file_serves_the_old_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());

    let store = SqliteStore::connect(&url).await.unwrap();
    let mut before = Client::new(store.clone());
    let waiting = before.start().await;
    let finished = before.start().await;
    let asked = before.wait_for(&waiting, "input_required").await;
    before.wait_for(&finished, "input_required").await;
    before.answer(&finished, "Ada").await;
    let done = before.wait_for(&finished, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
    drop(before);
    store.close().await;
    drop(store);

    let mut after = Client::new(SqliteStore::connect(&url).await.unwrap());
    assert_eq!(
        after.get(&finished).await,
        done,
        "a finished task reads the same"
    );
    assert_eq!(
        after.get(&waiting).await,
        asked,
        "a waiting task reads the same"
    );
    after.answer(&waiting, "Grace").await;
    let done = after.wait_for(&waiting, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Grace!");
}
