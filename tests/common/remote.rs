//! A 2026-07-28 client of a server in another process, over HTTP as the
//! caller `alice`.

use std::time::{Duration, Instant};

use mcp_task_layer::client::HttpTransport;
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse};
use serde_json::{json, Value};
use tower::ServiceExt;

pub struct Remote {
    http: HttpTransport,
    next: i64,
}

impl Remote {
    pub fn new(url: &str) -> Remote {
        Remote {
            http: HttpTransport::new(url)
                .expect("url")
                .with_bearer("alice")
                .expect("token"),
            next: 0,
        }
    }

    pub async fn send(&mut self, method: &str, mut params: Value) -> JsonRpcResponse {
        self.next += 1;
        params["_meta"] = super::meta(true);
        let req = JsonRpcRequest::new(self.next, method, params);
        self.http
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// Call a tool that must become a task; its id.
    pub async fn start(&mut self, tool: &str, arguments: Value) -> String {
        let resp = self
            .send("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        let result = resp.result_value().expect("tools/call result");
        assert_eq!(
            result["resultType"], "task",
            "{tool} became a task: {result}"
        );
        result["taskId"].as_str().expect("taskId").to_owned()
    }

    pub async fn get(&mut self, id: &str) -> Value {
        let resp = self.send("tasks/get", json!({"taskId": id})).await;
        resp.result_value()
            .unwrap_or_else(|| panic!("tasks/get {id}: {resp:?}"))
            .clone()
    }

    pub async fn cancel(&mut self, id: &str) {
        let resp = self.send("tasks/cancel", json!({"taskId": id})).await;
        assert!(resp.result_value().is_some(), "tasks/cancel: {resp:?}");
    }

    /// Answer every outstanding request of `asked` (a `confirm_delete`
    /// task) with a confirmation.
    pub async fn confirm(&mut self, id: &str, asked: &Value) {
        let answers: serde_json::Map<String, Value> = asked["inputRequests"]
            .as_object()
            .expect("inputRequests")
            .keys()
            .map(|k| {
                let answer = json!({"action": "accept", "content": {"confirm": true}});
                (k.clone(), answer)
            })
            .collect();
        let params = json!({"taskId": id, "inputResponses": answers});
        let resp = self.send("tasks/update", params).await;
        assert!(resp.result_value().is_some(), "tasks/update: {resp:?}");
    }

    /// Poll (real time: the server is another process) until `id` is in
    /// `status`, for at most `within`.
    pub async fn wait_for_within(&mut self, id: &str, status: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let body = self.get(id).await;
            if body["status"] == status {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "task {id} never reached {status}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// [`wait_for_within`](Self::wait_for_within) 30 s.
    pub async fn wait_for(&mut self, id: &str, status: &str) -> Value {
        self.wait_for_within(id, status, Duration::from_secs(30))
            .await
    }
}
