//! Notifications outside any call, to the clients that listen: a 2026-07-28
//! `subscriptions/listen` stream (list changes, and the resources it names,
//! which the gateway subscribes to upstream while someone listens), and the
//! one client of a stdio connection in the 2025-11-25 era (every list
//! change, and the resources it subscribed to with `resources/subscribe`).
//!
//! A `subscriptions/listen` that also names `taskIds` is the layer's: it
//! acknowledges the task ids only, and the client listens for the rest on a
//! stream of its own.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;

use super::notices::{Filter, Notice, Notices};
use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest};
use crate::peer::Peer;
use crate::upstream::Upstream;

/// The most resources one stream may name.
const MAX_URIS: usize = 1024;

/// `_meta` key tying a notification to its `subscriptions/listen` request.
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// How long the keeper waits before asking again for an upstream that
/// could not be reached.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The clients listening: the resources the gateway holds an upstream
/// subscription to, with how many listeners want each; and the 2025-era
/// stdio clients' resources.
#[derive(Debug)]
pub(super) struct Listeners {
    notices: Notices,
    upstream: Arc<Upstream>,
    connect_wait: Duration,
    held: Mutex<HashMap<String, usize>>,
    /// Per session-wide peer (by address): the resources its client
    /// subscribed to.
    sessions: Mutex<HashMap<usize, Arc<Mutex<HashSet<String>>>>>,
    /// Taken by every change of what the upstream is subscribed to (a
    /// subscribe, an unsubscribe, a renewal), so that they reach it in the
    /// order they were decided.
    changing: tokio::sync::Mutex<()>,
    /// The upstream connection every wanted resource is subscribed on.
    subscribed_on: Mutex<Option<u64>>,
    /// Whether the keeper runs: the task that subscribes every wanted
    /// resource again on the upstream's next connection when one ends (a
    /// child restarted, an HTTP session gone).
    keeping: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn peer_key(peer: &Peer) -> usize {
    Arc::as_ptr(&peer.0).cast::<()>() as usize
}

/// A stream's share of the upstream subscriptions: given back when the
/// stream ends, however it ends; the last one out unsubscribes upstream.
struct Held {
    listeners: Weak<Listeners>,
    uris: Vec<String>,
}

/// One holder of `uri` fewer; whether it was the last (no entry is left
/// for a resource nobody holds).
fn release(counts: &mut HashMap<String, usize>, uri: &str) -> bool {
    match counts.get_mut(uri) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        _ => {
            counts.remove(uri);
            true
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(listeners) = self.listeners.upgrade() else {
            return;
        };
        let unused: Vec<String> = {
            let mut held = lock(&listeners.held);
            self.uris
                .drain(..)
                .filter(|uri| release(&mut held, uri))
                .collect()
        };
        if unused.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _turn = listeners.changing.lock().await;
                // Wanted again meanwhile (another stream, or a 2025
                // session's own subscription): kept.
                let wanted = listeners.wanted();
                for uri in unused.into_iter().filter(|u| !wanted.contains(u)) {
                    let _ = listeners
                        .upstream_request("resources/unsubscribe", json!({ "uri": uri }))
                        .await;
                }
            });
        }
    }
}

impl Listeners {
    /// No one listens yet; `notices` is what the upstream says.
    pub(super) fn new(notices: Notices, upstream: Arc<Upstream>, connect_wait: Duration) -> Self {
        Listeners {
            notices,
            upstream,
            connect_wait,
            held: Mutex::default(),
            sessions: Mutex::default(),
            changing: tokio::sync::Mutex::new(()),
            subscribed_on: Mutex::default(),
            keeping: AtomicBool::new(false),
        }
    }

    /// A request of the gateway's own to the upstream's primary
    /// connection; the connection's serial.
    async fn upstream_request(&self, method: &str, params: Value) -> Result<u64, JsonRpcError> {
        let (link, _) = self.upstream.session(self.connect_wait).await?;
        bounded(self.connect_wait, method, link.request(method, params))
            .await
            .map(|_| link.serial)
    }

    /// Every resource some client wants: the streams' and the sessions'.
    fn wanted(&self) -> HashSet<String> {
        let mut wanted: HashSet<String> = lock(&self.held).keys().cloned().collect();
        let sessions: Vec<_> = lock(&self.sessions).values().cloned().collect();
        for uris in sessions {
            wanted.extend(lock(&uris).iter().cloned());
        }
        wanted
    }

    /// Run the keeper, unless it runs: while some resource is wanted, it
    /// waits for the upstream connection they are subscribed on to end,
    /// then subscribes every wanted resource on the next one.
    fn keep(self: &Arc<Self>) {
        if self.keeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(listeners) = me.upgrade() else {
                    return;
                };
                if listeners.wanted().is_empty() {
                    // A want made now calls `keep` after it is made: either
                    // it finds the flag down and starts a keeper, or this
                    // one sees the want below and goes on.
                    let _turn = listeners.changing.lock().await;
                    if listeners.wanted().is_empty() {
                        *lock(&listeners.subscribed_on) = None;
                        listeners.keeping.store(false, Ordering::Release);
                        if listeners.wanted().is_empty()
                            || listeners.keeping.swap(true, Ordering::AcqRel)
                        {
                            return;
                        }
                    }
                }
                let link = match listeners.upstream.session(listeners.connect_wait).await {
                    Ok((link, _)) => link,
                    Err(_) => {
                        drop(listeners);
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        continue;
                    }
                };
                {
                    let _turn = listeners.changing.lock().await;
                    if *lock(&listeners.subscribed_on) != Some(link.serial) {
                        for uri in listeners.wanted() {
                            let subscribe = "resources/subscribe";
                            let asked = link.request(subscribe, json!({ "uri": uri }));
                            if let Err(e) = bounded(listeners.connect_wait, subscribe, asked).await
                            {
                                tracing::warn!(%uri, error = %e.message, "could not subscribe to a resource again on the upstream's new connection");
                            }
                        }
                        *lock(&listeners.subscribed_on) = Some(link.serial);
                    }
                }
                drop(listeners);
                link.closed().await;
            }
        });
    }

    /// 2026-07-28 `subscriptions/listen` (without `taskIds`): acknowledge
    /// what the gateway can deliver, then push it until the client goes;
    /// the result then.
    pub(super) async fn listen(
        self: &Arc<Self>,
        req: &JsonRpcRequest,
    ) -> Result<Value, JsonRpcError> {
        let asked = req
            .params_object()
            .and_then(|p| p.get("notifications"))
            .and_then(Value::as_object)
            .ok_or_else(|| JsonRpcError::invalid_params("\"notifications\" must be an object"))?;
        let uris = requested_uris(asked)?;
        let peer = req.extensions.get::<Peer>().cloned().ok_or_else(|| {
            JsonRpcError::new(
                code::INVALID_REQUEST,
                "subscriptions/listen needs a transport that can stream notifications",
            )
        })?;
        let info = self.upstream.info(self.connect_wait).await?;
        let caps = &info.capabilities;
        let flag = |k: &str| asked.get(k).and_then(Value::as_bool).unwrap_or(false);
        let mut filter = Filter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged") && caps.get("prompts").is_some(),
            resources: flag("resourcesListChanged") && caps.get("resources").is_some(),
            uris: HashSet::new(),
            logs: false,
        };
        let can_subscribe = caps
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // Heard from before it is acknowledged: nothing falls in between.
        let mut rx = self.notices.subscribe();
        let mut held = Held {
            listeners: Arc::downgrade(self),
            uris: Vec::new(),
        };
        if can_subscribe {
            for uri in uris {
                if self.hold(&uri, &mut held).await.is_ok() {
                    filter.uris.insert(uri);
                }
            }
        }
        let meta =
            json!({ META_SUBSCRIPTION_ID: serde_json::to_value(&req.id).unwrap_or(Value::Null) });
        peer.notify(
            "notifications/subscriptions/acknowledged".into(),
            json!({ "notifications": filter.to_wire(), "_meta": meta }),
        )
        .await;
        let closed = peer.closed();
        tokio::pin!(closed);
        loop {
            let notices = tokio::select! {
                got = rx.recv() => match got {
                    Ok(n) if filter.wants(&n) => vec![(n.method, n.params.clone())],
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => filter.catch_up(),
                    Err(RecvError::Closed) => break,
                },
                () = &mut closed => break,
            };
            for (method, params) in notices {
                peer.notify(method.to_owned(), tagged(params, &meta)).await;
            }
        }
        drop(held);
        Ok(json!({}))
    }

    /// One more listener of `uri`, in `held`: the first subscribes
    /// upstream. It counts before the upstream is asked: a caller dropped
    /// while the upstream answers gives it back with `held` (the last one
    /// out unsubscribes), whether the upstream took the subscription or not.
    async fn hold(self: &Arc<Self>, uri: &str, held: &mut Held) -> Result<(), JsonRpcError> {
        {
            let _turn = self.changing.lock().await;
            let first = {
                let mut counts = lock(&self.held);
                let n = counts.entry(uri.to_owned()).or_default();
                *n += 1;
                *n == 1
            };
            held.uris.push(uri.to_owned());
            if first {
                match self
                    .upstream_request("resources/subscribe", json!({ "uri": uri }))
                    .await
                {
                    Ok(serial) => self.subscribed(serial),
                    Err(e) => {
                        // Not subscribed: nothing to give back upstream.
                        held.uris.pop();
                        release(&mut lock(&self.held), uri);
                        return Err(e);
                    }
                }
            }
        }
        self.keep();
        Ok(())
    }

    /// A resource was subscribed on connection `serial`: the others are on
    /// it too unless they are on an older one (the keeper renews them).
    fn subscribed(&self, serial: u64) {
        let mut on = lock(&self.subscribed_on);
        if on.is_none() {
            *on = Some(serial);
        }
    }

    /// A 2025-era `initialize` on a connection that outlives its requests
    /// (stdio): from now on its client hears every list change, and the
    /// resources it subscribes to, until the connection ends.
    pub(super) fn open_session(self: &Arc<Self>, req: &JsonRpcRequest) {
        let Some(peer) = req.extensions.get::<Peer>().cloned() else {
            return;
        };
        if !peer.outlives_request() {
            return;
        }
        let key = peer_key(&peer);
        let uris = {
            let mut sessions = lock(&self.sessions);
            if sessions.contains_key(&key) {
                return;
            }
            let uris = Arc::default();
            sessions.insert(key, Arc::clone(&uris));
            uris
        };
        let mut rx = self.notices.subscribe();
        let listeners = Arc::downgrade(self);
        tokio::spawn(async move {
            let closed = peer.closed();
            tokio::pin!(closed);
            loop {
                let notices: Vec<(&str, Value)> = tokio::select! {
                    got = rx.recv() => match got {
                        Ok(n) if session_wants(&uris, &n) => vec![(n.method, n.params.clone())],
                        Ok(_) => continue,
                        Err(RecvError::Lagged(_)) => Filter::everything(lock(&uris).clone()).catch_up(),
                        Err(RecvError::Closed) => break,
                    },
                    () = &mut closed => break,
                };
                for (method, params) in notices {
                    peer.notify(method.to_owned(), params).await;
                }
            }
            if let Some(listeners) = listeners.upgrade() {
                lock(&listeners.sessions).remove(&key);
            }
        });
    }

    /// Whether the resource `req` names is wanted by a listener or a
    /// session.
    pub(super) fn still_wanted(&self, req: &JsonRpcRequest) -> bool {
        req.params_object()
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .is_some_and(|uri| self.wanted().contains(uri))
    }

    /// A 2025-era `resources/subscribe` the upstream accepted, or a
    /// `resources/unsubscribe`: what the client's session hears changes.
    pub(super) fn note_subscription(self: &Arc<Self>, req: &JsonRpcRequest) {
        let Some(peer) = req.extensions.get::<Peer>() else {
            return;
        };
        let Some(uri) = req
            .params_object()
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
        else {
            return;
        };
        let Some(uris) = lock(&self.sessions).get(&peer_key(peer)).cloned() else {
            return;
        };
        let subscribed = {
            let mut uris = lock(&uris);
            if req.method == "resources/subscribe" {
                uris.len() < MAX_URIS && uris.insert(uri.to_owned())
            } else {
                uris.remove(uri);
                false
            }
        };
        if subscribed {
            self.keep();
        }
    }
}

/// The upstream's answer to `method`, waited for `wait` at most: every
/// change of the subscriptions waits its turn meanwhile.
async fn bounded<T>(
    wait: Duration,
    method: &str,
    answer: impl std::future::Future<Output = Result<T, JsonRpcError>>,
) -> Result<T, JsonRpcError> {
    tokio::time::timeout(wait, answer)
        .await
        .unwrap_or_else(|_| {
            Err(JsonRpcError::internal(format!(
                "the upstream did not answer {method} within {} s",
                wait.as_secs_f32()
            )))
        })
}

fn session_wants(uris: &Mutex<HashSet<String>>, notice: &Notice) -> bool {
    Filter::everything(HashSet::new()).wants(notice)
        || notice.uri.as_ref().is_some_and(|u| lock(uris).contains(u))
}

/// `resourceSubscriptions`: at most [`MAX_URIS`] strings.
fn requested_uris(asked: &Map<String, Value>) -> Result<Vec<String>, JsonRpcError> {
    let Some(list) = asked.get("resourceSubscriptions") else {
        return Ok(Vec::new());
    };
    let bad = || {
        JsonRpcError::invalid_params(format!(
            "\"notifications.resourceSubscriptions\" must be an array of at most {MAX_URIS} URIs"
        ))
    };
    let list = list
        .as_array()
        .filter(|l| l.len() <= MAX_URIS)
        .ok_or_else(bad)?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for uri in list {
        let uri = uri.as_str().ok_or_else(bad)?;
        if seen.insert(uri) {
            out.push(uri.to_owned());
        }
    }
    Ok(out)
}

/// `params` with the subscription's id in its `_meta`.
fn tagged(mut params: Value, meta: &Value) -> Value {
    if !params.is_object() {
        params = json!({});
    }
    if let (Some(p), Some(m)) = (params.as_object_mut(), meta.as_object()) {
        let slot = p.entry("_meta").or_insert_with(|| json!({}));
        if let Some(slot) = slot.as_object_mut() {
            slot.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    params
}
