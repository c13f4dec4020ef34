//! Notifications that belong to no call, through the gateway: the
//! upstream's list changes and resource updates reach a 2026-07-28
//! `subscriptions/listen` stream (only what it asked for, tagged with its
//! subscription id; the resources subscribed upstream while it listens) and
//! the client of a stdio connection in the 2025-11-25 era; a client's
//! `notifications/roots/list_changed` reaches the upstream.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcp_task_layer::gateway::UpstreamTarget;
use mcp_task_layer::store::BoxFuture;
use mcp_task_layer::{ClientPeer, JsonRpcError, JsonRpcResponse, Peer, TaskPolicy};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common;
use crate::harness::{event, events, events_file, kill, text, Gateway};

/// A client end that hands every notification to the test, and hangs up
/// when told.
struct Listener {
    sent: mpsc::UnboundedSender<(String, Value)>,
    gone: CancellationToken,
    /// A stdio connection's peer (it outlives each request).
    connection: AtomicBool,
}

impl ClientPeer for Listener {
    fn request(&self, method: String, _: Value) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(async move { Err(JsonRpcError::internal(format!("no {method} here"))) })
    }

    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()> {
        let _ = self.sent.send((method, params));
        Box::pin(async {})
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        let gone = self.gone.clone();
        Box::pin(async move { gone.cancelled().await })
    }

    fn outlives_request(&self) -> bool {
        self.connection.load(Ordering::Relaxed)
    }
}

struct Client {
    peer: Peer,
    heard: mpsc::UnboundedReceiver<(String, Value)>,
    gone: CancellationToken,
}

fn client(connection: bool) -> Client {
    let (sent, heard) = mpsc::unbounded_channel();
    let gone = CancellationToken::new();
    let peer = Peer::new(Listener {
        sent,
        gone: gone.clone(),
        connection: AtomicBool::new(connection),
    });
    Client { peer, heard, gone }
}

impl Client {
    /// A 2026-07-28 `subscriptions/listen` of alice's with `notifications`,
    /// on this client's stream; its answer when it ends.
    fn listen(&self, gw: &Gateway, notifications: Value) -> JoinHandle<JsonRpcResponse> {
        let params = json!({ "notifications": notifications, "_meta": common::meta(true) });
        let gw = gw.as_owner("alice");
        let peer = self.peer.clone();
        tokio::spawn(async move {
            gw.send_with_peer("subscriptions/listen", params, peer)
                .await
        })
    }

    /// The next notification (at most 30 s).
    async fn next(&mut self) -> (String, Value) {
        tokio::time::timeout(Duration::from_secs(30), self.heard.recv())
            .await
            .expect("a notification within 30 s")
            .expect("the peer lives")
    }
}

async fn announce(gw: &Gateway, args: Value) {
    let result = gw.call("announce", args).await;
    assert_eq!(result["content"][0]["text"], "sent", "{result}");
}

/// R55 and the schema's `SubscriptionFilter`: a stream hears what it asked
/// for and nothing else, each tagged with its subscription id; the resource
/// is subscribed upstream while it listens and unsubscribed after.
async fn a_listen_stream_hears_what_it_asked_for(up: UpstreamTarget, file: &std::path::Path) {
    let gw = Gateway::start(up, &[("announce", TaskPolicy::Sync)]).await;
    let mut c = client(false);
    let listening = c.listen(
        &gw,
        json!({ "toolsListChanged": true, "resourceSubscriptions": ["memo://note"] }),
    );
    let (method, ack) = c.next().await;
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["notifications"],
        json!({ "toolsListChanged": true, "resourceSubscriptions": ["memo://note"] })
    );
    let id = ack["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
    assert!(!id.is_null(), "{ack}");
    event(file, "subscribed memo://note").await;

    // Another resource's update and a prompts change are not for it: the
    // next thing it hears is its own resource's update.
    announce(&gw, json!({ "kind": "updated", "uri": "memo://other" })).await;
    announce(&gw, json!({ "kind": "prompts" })).await;
    announce(&gw, json!({ "kind": "updated", "uri": "memo://note" })).await;
    let (method, params) = c.next().await;
    assert_eq!(method, "notifications/resources/updated");
    assert_eq!(params["uri"], "memo://note");
    assert_eq!(
        params["_meta"]["io.modelcontextprotocol/subscriptionId"],
        id
    );

    // A new tool: heard after the gateway listed it anew.
    announce(&gw, json!({ "kind": "tools", "name": "added" })).await;
    let (method, params) = c.next().await;
    assert_eq!(method, "notifications/tools/list_changed");
    assert_eq!(
        params["_meta"]["io.modelcontextprotocol/subscriptionId"],
        id
    );
    let listed = gw.send26("tools/list", json!({}), true).await;
    let tools = common::ok(&listed);
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "added"),
        "{tools}"
    );

    // The client goes: the stream ends, the upstream subscription too.
    c.gone.cancel();
    let done = listening.await.unwrap();
    assert_eq!(common::ok(&done)["resultType"], "complete");
    event(file, "unsubscribed memo://note").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_listen_stream_hears_what_it_asked_for() {
    let (_dir, file) = events_file();
    let Some(up) = crate::harness::python(&file) else {
        return;
    };
    a_listen_stream_hears_what_it_asked_for(up, &file).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_listen_stream_hears_what_it_asked_for() {
    let (_dir, file) = events_file();
    let Some((_server, up)) = crate::http::python(&file).await else {
        return;
    };
    a_listen_stream_hears_what_it_asked_for(up, &file).await;
}

/// The upstream restarts (its child killed): the gateway subscribes the
/// stream's resource again on the new connection, and the stream goes on
/// hearing it (before, the subscription died with the old child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_keeps_its_resource_when_the_upstream_restarts() {
    let (_dir, file) = events_file();
    let Some(up) = crate::harness::python(&file) else {
        return;
    };
    let gw = Gateway::start(
        up,
        &[("announce", TaskPolicy::Sync), ("pid", TaskPolicy::Sync)],
    )
    .await;
    let mut c = client(false);
    let _listening = c.listen(&gw, json!({ "resourceSubscriptions": ["memo://note"] }));
    let (method, _) = c.next().await;
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    event(&file, "subscribed memo://note").await;

    let pid = text(&gw.call("pid", json!({})).await).to_owned();
    kill(&pid);
    // Bounded wait for the new child's subscription (the restart backs off).
    let subscribed = |file: &std::path::Path| {
        events(file)
            .iter()
            .filter(|l| *l == "subscribed memo://note")
            .count()
    };
    for _ in 0..600 {
        if subscribed(&file) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(subscribed(&file), 2, "{:?}", events(&file));
    announce(&gw, json!({ "kind": "updated", "uri": "memo://note" })).await;
    let (method, params) = c.next().await;
    assert_eq!(method, "notifications/resources/updated");
    assert_eq!(params["uri"], "memo://note");
    c.gone.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_stdio_client_hears_list_changes_its_resources_and_logs() {
    let (_dir, file) = events_file();
    let Some(up) = crate::harness::python(&file) else {
        return;
    };
    let gw = Gateway::start(up, &[("announce", TaskPolicy::Sync)]).await;
    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": { "name": "test", "version": "1" },
    });
    let mut stdio = client(true);
    let r = gw
        .send_with_peer("initialize", init.clone(), stdio.peer.clone())
        .await;
    assert_eq!(
        common::ok(&r)["capabilities"]["resources"]["subscribe"],
        true
    );
    // An HTTP client's peer ends with its request: nothing is kept for it.
    let mut http = client(false);
    gw.send_with_peer("initialize", init, http.peer.clone())
        .await;
    let r = gw
        .send_with_peer(
            "resources/subscribe",
            json!({ "uri": "memo://note" }),
            stdio.peer.clone(),
        )
        .await;
    common::ok(&r);

    let call = |args: Value| json!({ "name": "announce", "arguments": args });
    for args in [
        json!({ "kind": "updated", "uri": "memo://other" }),
        json!({ "kind": "updated", "uri": "memo://note" }),
        json!({ "kind": "resources" }),
    ] {
        let r = gw.send("tools/call", call(args)).await;
        common::ok(&r);
    }
    let (method, params) = stdio.next().await;
    assert_eq!(method, "notifications/resources/updated");
    assert_eq!(
        params,
        json!({ "uri": "memo://note" }),
        "no subscription id in 2025"
    );
    let (method, _) = stdio.next().await;
    assert_eq!(method, "notifications/resources/list_changed");
    assert!(http.heard.try_recv().is_err(), "nothing for an HTTP client");

    // Unsubscribed: its resource's updates stop.
    let r = gw
        .send_with_peer(
            "resources/unsubscribe",
            json!({ "uri": "memo://note" }),
            stdio.peer.clone(),
        )
        .await;
    common::ok(&r);
    for args in [
        json!({ "kind": "updated", "uri": "memo://note" }),
        json!({ "kind": "prompts" }),
    ] {
        common::ok(&gw.send("tools/call", call(args)).await);
    }
    let (method, _) = stdio.next().await;
    assert_eq!(method, "notifications/prompts/list_changed");

    // Its roots changed: the upstream hears it, and logs a message that
    // belongs to no call, which the client hears.
    gw.notify("notifications/roots/list_changed", json!({}))
        .await;
    event(&file, "roots changed").await;
    let (method, params) = stdio.next().await;
    assert_eq!(method, "notifications/message");
    assert_eq!(
        params,
        json!({ "level": "info", "data": "roots changed", "logger": "upstream" })
    );
    assert!(http.heard.try_recv().is_err(), "nothing for an HTTP client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_request_is_checked_before_anything_is_subscribed() {
    let (_dir, file) = events_file();
    let Some(up) = crate::harness::python(&file) else {
        return;
    };
    let gw = Gateway::start(up, &[]).await;
    let c = client(false);
    for (notifications, why) in [
        (
            json!({ "resourceSubscriptions": "memo://note" }),
            "a string",
        ),
        (json!({ "resourceSubscriptions": [1] }), "a number"),
        (json!(true), "not an object"),
    ] {
        let r = gw
            .send_with_peer(
                "subscriptions/listen",
                json!({ "notifications": notifications, "_meta": common::meta(false) }),
                c.peer.clone(),
            )
            .await;
        let e = r.error_value().unwrap_or_else(|| panic!("{why}: an error"));
        assert_eq!(e.code, -32602, "{why}");
    }
    // No way back to the client: refused, not held open.
    let r = gw
        .send26(
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
            false,
        )
        .await;
    assert_eq!(r.error_value().map(|e| e.code), Some(-32600));
    assert!(
        !crate::harness::events(&file)
            .iter()
            .any(|l| l.starts_with("subscribed")),
        "nothing subscribed upstream"
    );
}

/// An upstream that never answers `resources/subscribe`: the stream that
/// asked for the resource is acknowledged without it once the gateway
/// stops waiting (its connect wait), and the next stream is served too.
/// Before, the subscribe waited for ever while holding the turn of every
/// change, and no stream asking for a resource was acknowledged again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_never_answers_a_subscribe_holds_no_stream_for_ever() {
    let (up, _fake) = crate::fake::fake_upstream().await;
    let cfg =
        mcp_task_layer::gateway::ProxyConfig::default().with_connect_wait(Duration::from_secs(1));
    let gw = Gateway::with_config(up, cfg).await;
    for _ in 0..2 {
        let mut c = client(false);
        c.listen(&gw, json!({ "resourceSubscriptions": ["memo://never"] }));
        let (method, ack) = c.next().await;
        assert_eq!(method, "notifications/subscriptions/acknowledged");
        assert_eq!(ack["notifications"], json!({}), "not subscribed: {ack}");
        c.gone.cancel();
    }
}

/// A listener whose stream is dropped while the upstream has its
/// `resources/subscribe` (taken upstream, not answered yet) gives the
/// subscription back: the gateway unsubscribes. Before, a caller dropped
/// there left the upstream subscribed with nobody counted as listening,
/// so nothing ever unsubscribed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_dropped_while_the_upstream_subscribes_is_unsubscribed() {
    let (up, fake) = crate::fake::fake_upstream().await;
    let cfg =
        mcp_task_layer::gateway::ProxyConfig::default().with_connect_wait(Duration::from_secs(60));
    let gw = Gateway::with_config(up, cfg).await;
    let c = client(false);
    let listening = c.listen(&gw, json!({ "resourceSubscriptions": ["memo://x"] }));
    // The upstream has the subscribe (bounded: 30 s).
    for _ in 0..600 {
        if fake.open.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        fake.open.load(Ordering::SeqCst),
        1,
        "the subscribe is upstream"
    );
    listening.abort();
    assert!(listening.await.is_err());
    // Bounded: 30 s.
    for _ in 0..600 {
        if fake.unsubscribes.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fake.unsubscribes.load(Ordering::SeqCst), 1);
}

/// A 2025-11-25 client's `resources/unsubscribe` lets go of its own
/// interest only: a resource another client's stream still listens to
/// stays subscribed upstream (until that stream ends). Before, it was
/// forwarded, and the listener silently stopped hearing its resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_unsubscribe_keeps_what_another_client_listens_to() {
    let (_dir, file) = events_file();
    let Some(up) = crate::harness::python(&file) else {
        return;
    };
    let gw = Gateway::start(up, &[]).await;
    let mut c = client(false);
    let listening = c.listen(&gw, json!({ "resourceSubscriptions": ["memo://note"] }));
    let (method, _) = c.next().await;
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    event(&file, "subscribed memo://note").await;

    let mallory = gw.as_owner("mallory");
    let r = mallory
        .send("resources/unsubscribe", json!({ "uri": "memo://note" }))
        .await;
    assert_eq!(common::ok(&r), &json!({}));
    let unsubscribed =
        |file: &std::path::Path| events(file).iter().any(|l| l == "unsubscribed memo://note");
    assert!(!unsubscribed(&file), "{:?}", events(&file));

    // The listener's end lets it go upstream.
    c.gone.cancel();
    let _ = listening.await;
    event(&file, "unsubscribed memo://note").await;
}
