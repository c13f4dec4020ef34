//! Push instead of poll: `subscriptions/listen` with `notifications.taskIds`
//! (R55-R57), in process and over real HTTP with SSE.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::{accept, err, meta, ok, Client};
use mcp_task_layer::store::BoxFuture;
use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, Peer, TaskOwner, TaskStatus,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower::ServiceExt;

/// A client end that forwards every notification to a channel.
#[derive(Clone)]
struct Listener(mpsc::UnboundedSender<(String, Value)>);

impl ClientPeer for Listener {
    fn request(&self, _: String, _: Value) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(async { Err(JsonRpcError::internal("not expected")) })
    }
    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()> {
        let _ = self.0.send((method, params));
        Box::pin(async {})
    }
}

/// The notifications a [`Listener`] forwards.
type Notifications = mpsc::UnboundedReceiver<(String, Value)>;

/// The answer to a `subscriptions/listen` still streaming.
type Pending = tokio::task::JoinHandle<Result<JsonRpcResponse, std::convert::Infallible>>;

fn listen_request(id: i64, task_ids: &[&str], tasks: bool, owner: Option<&str>) -> JsonRpcRequest {
    let mut req = JsonRpcRequest::new(
        id,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": task_ids}, "_meta": meta(tasks)}),
    );
    if let Some(o) = owner {
        req.extensions.insert(TaskOwner::new(o));
    }
    req
}

#[tokio::test(start_paused = true)]
async fn r56_changes_are_pushed_in_order_as_tasks_get_would_show_them() {
    let mut c = Client::new(common::layer());
    c.owner = Some("alice".into());
    let mine = c.start("ask", json!({})).await;
    let bob = c.as_owner("bob");
    let theirs = bob.start("hang", json!({})).await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = listen_request(77, &[&mine, &theirs, "unknown"], true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    let listening = tokio::spawn(c.svc.clone().oneshot(req));

    let (method, ack) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["notifications"]["taskIds"],
        json!([mine]),
        "only the caller's known tasks"
    );
    assert_eq!(ack["_meta"]["io.modelcontextprotocol/subscriptionId"], 77);

    let mut statuses = Vec::new();
    let mut answered = false;
    while let Some((method, params)) = rx.recv().await {
        assert_eq!(
            method, "notifications/tasks",
            "R57: nothing but task notifications"
        );
        assert_eq!(
            params["_meta"]["io.modelcontextprotocol/subscriptionId"], 77,
            "R56"
        );
        assert!(params.get("resultType").is_none(), "R56: no resultType");
        let mut body = c.get_ok(&mine).await;
        body.as_object_mut().unwrap().remove("resultType");
        let mut pushed = params.clone();
        pushed.as_object_mut().unwrap().remove("_meta");
        if pushed["status"] == body["status"] {
            assert_eq!(pushed, body, "R56: what tasks/get returns at that moment");
        }
        statuses.push(params["status"].as_str().unwrap().to_owned());
        if params["status"] == "input_required" && !answered {
            answered = true;
            ok(&c
                .update(&mine, json!({"name": accept("name", "Ada")}))
                .await);
        }
        if params["status"] == "completed" {
            break;
        }
    }
    assert_eq!(statuses, ["input_required", "working", "completed"]);
    let done = listening.await.unwrap().unwrap();
    assert_eq!(
        ok(&done),
        &json!({"resultType": "complete"}),
        "answered once every task ended"
    );
    let _ = c.wait_for(&mine, TaskStatus::Completed).await;
}

#[tokio::test(start_paused = true)]
async fn r55_listen_for_tasks_without_the_extension_is_32021() {
    let c = Client::new(common::layer());
    let id = c.start("hang", json!({})).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let mut req = listen_request(5, &[&id], false, None);
    req.extensions.insert(Peer::new(Listener(tx)));
    let resp: JsonRpcResponse = c.svc.clone().oneshot(req).await.unwrap();
    assert_eq!(err(&resp).code, -32021, "R55");
    // Other subscriptions are the inner server's business.
    let other = JsonRpcRequest::new(
        6,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}, "_meta": meta(true)}),
    );
    let resp = c.svc.clone().oneshot(other).await.unwrap();
    assert_eq!(
        err(&resp).code,
        -32601,
        "passed through to the inner server"
    );
}

mod expiry;
#[cfg(feature = "axum")]
mod http;
mod replicas;
