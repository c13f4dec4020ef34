//! A client end for tests that need a way back to the client ([`Peer`]).

use std::sync::{Arc, Mutex};

use mcp_task_layer::store::BoxFuture;
use mcp_task_layer::{ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, Peer, TaskOwner};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::Client;

/// A client end that answers every server→client request with the name
/// "Grace" and records what it was sent.
#[derive(Clone, Default)]
pub struct TestPeer {
    pub sent: Arc<Mutex<Vec<(String, Value)>>>,
}

impl TestPeer {
    /// The statuses of the status notifications sent so far, in order.
    pub fn statuses(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "notifications/tasks/status")
            .map(|(_, p)| p["status"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl ClientPeer for TestPeer {
    fn request(
        &self,
        method: String,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        self.sent.lock().unwrap().push((method, params.clone()));
        Box::pin(async { Ok(json!({"action": "accept", "content": {"name": "Grace"}})) })
    }
    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()> {
        self.sent.lock().unwrap().push((method, params));
        Box::pin(async {})
    }
}

/// Send a request through `c`'s layer with `peer` as its way back.
pub async fn send_with_peer(
    c: &Client,
    method: &str,
    params: Value,
    peer: &Arc<TestPeer>,
) -> JsonRpcResponse {
    let mut req = JsonRpcRequest::new(9_000, method, params);
    req.extensions.insert(Peer::new(TestPeer::clone(peer)));
    if let Some(owner) = &c.owner {
        req.extensions.insert(TaskOwner::new(owner.clone()));
    }
    c.svc.clone().oneshot(req).await.unwrap()
}

/// A client end that takes nothing: every request and notification sent
/// to it waits for ever (a client that stopped reading its stream).
#[derive(Clone, Copy, Default)]
pub struct Unresponsive;

impl ClientPeer for Unresponsive {
    fn request(&self, _: String, _: Value) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(std::future::pending())
    }
    fn notify(&self, _: String, _: Value) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }
}
