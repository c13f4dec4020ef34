//! `subscriptions/listen` with `notifications.taskIds` (2026-07-28): push
//! every visible change of the watched tasks to the client, in order, until
//! each has ended or the client has gone.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use std::sync::Arc;

use super::{respond, Reply};
use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::peer::Peer;
use crate::protocol::TaskStatus;
use crate::runtime::engine::Engine;
use crate::runtime::listeners::{Listener, Pushed};
use crate::runtime::wire;
use crate::store::{Era, TaskRecord};

/// `_meta` key tying a notification to its `subscriptions/listen` request.
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

impl Engine {
    /// `subscriptions/listen` with `notifications.taskIds` (2026-07-28):
    /// acknowledge the ids the caller may see, then push
    /// `notifications/tasks` (what `tasks/get` would return, without
    /// `resultType`, tagged with the subscription id) on every change of
    /// those tasks, in order, through the request's [`Peer`]. Answers when
    /// every watched task has ended or the client has gone.
    pub(crate) async fn listen(&self, req: JsonRpcRequest) -> JsonRpcResponse {
        let answer = self.listen_inner(&req).await.map(|()| Reply::Ack);
        respond(req.id, answer)
    }

    async fn listen_inner(&self, req: &JsonRpcRequest) -> Result<(), JsonRpcError> {
        const MAX_WATCHED: usize = 1024;
        let asked = req
            .params_object()
            .and_then(|p| p.get("notifications"))
            .and_then(|n| n.get("taskIds"))
            .and_then(Value::as_array)
            .ok_or_else(|| {
                JsonRpcError::invalid_params("\"notifications.taskIds\" must be an array")
            })?;
        if asked.len() > MAX_WATCHED {
            return Err(JsonRpcError::invalid_params(format!(
                "at most {MAX_WATCHED} task ids per subscription"
            )));
        }
        let peer = req.extensions.get::<Peer>().cloned().ok_or_else(|| {
            JsonRpcError::new(
                code::INVALID_REQUEST,
                "subscriptions/listen needs a transport that can stream notifications",
            )
        })?;
        let subscription = serde_json::to_value(&req.id).unwrap_or(Value::Null);
        let owner = self.owner_of(req);
        // Each task is watched before it is read, so no change falls in
        // between; only the writes of watched tasks reach this stream.
        let mut listener = self.hub.listeners.open();
        let mut watched: HashMap<String, LastPushed> = HashMap::new();
        let mut order = Vec::new();
        for task_id in asked.iter().filter_map(Value::as_str) {
            if watched.contains_key(task_id) {
                continue;
            }
            listener.watch(task_id);
            let found = self.lookup(task_id, owner.as_deref(), Era::Modern).await?;
            match &found {
                Some(r) if !r.status.is_terminal() => {
                    watched.insert(r.id.clone(), LastPushed::of(r));
                }
                _ => listener.unwatch(task_id),
            }
            if let Some(r) = found {
                order.push(Value::String(r.id.clone()));
            }
        }
        let meta = json!({ META_SUBSCRIPTION_ID: subscription });
        peer.notify(
            "notifications/subscriptions/acknowledged".into(),
            json!({ "notifications": { "taskIds": order }, "_meta": meta }),
        )
        .await;
        let mut sub = Subscription {
            engine: self,
            peer,
            meta,
            owner,
            watched,
            listener,
            expiry_changed: true,
        };
        let closed = sub.peer.closed();
        tokio::pin!(closed);
        let mut resync = self.resync_period().map(|period| {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        // Reaping a task is no write a subscription hears of (a `DELETE`
        // fires no change feed either): it re-reads a watched task when its
        // TTL runs out, and the task, gone, ends its watch.
        let expiry = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(expiry);
        let mut expiry_armed = false;
        while !sub.watched.is_empty() {
            if std::mem::take(&mut sub.expiry_changed) {
                expiry_armed = match sub.earliest_expiry() {
                    Some(at) => {
                        let left = u64::try_from(at.saturating_sub(self.now_ms())).unwrap_or(0);
                        let when = tokio::time::Instant::now() + Duration::from_millis(left);
                        expiry.as_mut().reset(when);
                        true
                    }
                    None => false,
                };
            }
            let tick = async {
                match resync.as_mut() {
                    Some(tick) => {
                        tick.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let step = tokio::select! {
                pushed = sub.listener.recv() => match pushed {
                    Pushed::Record(record) => Step::Push(record),
                    Pushed::Changed(id, version) => Step::Changed(id, version),
                    // Too slow to see every write, or the store's feed
                    // lagged: catch up from the store.
                    Pushed::Missed => Step::Resync,
                },
                () = tick => Step::Resync,
                () = &mut expiry, if expiry_armed => Step::Expired,
                () = &mut closed => break,
            };
            match step {
                Step::Push(record) => sub.push_change(&record).await,
                Step::Changed(id, version) => {
                    if sub
                        .watched
                        .get(&id)
                        .is_some_and(|seen| seen.version < version)
                    {
                        sub.refresh(id).await?;
                    }
                }
                Step::Resync => sub.resync().await?,
                Step::Expired => sub.refresh_expired().await?,
            }
        }
        Ok(())
    }
}

/// What a subscription does next.
enum Step {
    Push(Arc<TaskRecord>),
    Changed(String, u64),
    Resync,
    Expired,
}

/// One open subscription: where its notifications go, and what it last
/// pushed of each task it still watches.
struct Subscription<'a> {
    engine: &'a Engine,
    peer: Peer,
    /// The `_meta` every notification carries (the subscription id).
    meta: Value,
    owner: Option<String>,
    watched: HashMap<String, LastPushed>,
    /// Its entries in the hub's map of listeners, one per watched task;
    /// dropped with the subscription.
    listener: Listener,
    /// Whether the set of watched tasks changed since its earliest expiry
    /// was last taken.
    expiry_changed: bool,
}

impl Subscription<'_> {
    /// Re-read every watched task and push what changed.
    async fn resync(&mut self) -> Result<(), JsonRpcError> {
        let ids: Vec<String> = self.watched.keys().cloned().collect();
        for task_id in ids {
            self.refresh(task_id).await?;
        }
        Ok(())
    }

    /// Re-read one watched task and push it if it changed; stop watching it
    /// if it is gone.
    async fn refresh(&mut self, task_id: String) -> Result<(), JsonRpcError> {
        let found = self
            .engine
            .lookup(&task_id, self.owner.as_deref(), Era::Modern)
            .await?;
        match found {
            Some(r) => self.push_change(&r).await,
            None => self.unwatch(&task_id),
        }
        Ok(())
    }

    /// Re-read the watched tasks whose TTL has run out: each is gone (or,
    /// on a store that keeps it a little longer, read again later).
    async fn refresh_expired(&mut self) -> Result<(), JsonRpcError> {
        let now = self.engine.now_ms();
        let due: Vec<String> = self
            .watched
            .iter()
            .filter(|(_, seen)| seen.expires_at_ms.is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for task_id in due {
            self.refresh(task_id).await?;
        }
        // A task still read after its TTL is retried a second later, not
        // in a busy loop.
        self.expiry_changed = true;
        Ok(())
    }

    /// The earliest TTL end among the watched tasks, if any has one; a
    /// task still readable past it is looked at again a second later.
    fn earliest_expiry(&self) -> Option<i64> {
        let now = self.engine.now_ms();
        self.watched
            .values()
            .filter_map(|seen| seen.expires_at_ms)
            .map(|at| {
                if at <= now {
                    now.saturating_add(1_000)
                } else {
                    at
                }
            })
            .min()
    }

    fn unwatch(&mut self, task_id: &str) {
        self.watched.remove(task_id);
        self.listener.unwatch(task_id);
        self.expiry_changed = true;
    }

    /// Notify one watched task's change, once per version.
    async fn push_change(&mut self, r: &TaskRecord) {
        let Some(seen) = self.watched.get_mut(&r.id) else {
            return;
        };
        if r.version <= seen.version {
            return;
        }
        let now = LastPushed::of(r);
        // A lease renewal is a new version that shows nothing new. A
        // partial answer may keep the status and, in the same millisecond,
        // `lastUpdatedAt`: it shows fewer input requests.
        let visible = now.shown() != seen.shown();
        *seen = now;
        if !visible {
            return;
        }
        if r.status.is_terminal() {
            self.unwatch(&r.id);
        }
        let mut params = wire::modern::detailed_value(r, None);
        params["_meta"] = self.meta.clone();
        self.peer.notify("notifications/tasks".into(), params).await;
    }
}

/// What a subscription last saw of a task.
struct LastPushed {
    version: u64,
    status: TaskStatus,
    updated_at_ms: i64,
    round: u32,
    /// Within one input round, keys are only ever answered, never added:
    /// their number tells a partial answer.
    outstanding: usize,
    /// A handler's status message may change within one millisecond.
    message: Option<String>,
    expires_at_ms: Option<i64>,
}

impl LastPushed {
    fn of(r: &TaskRecord) -> Self {
        LastPushed {
            version: r.version,
            status: r.status,
            updated_at_ms: r.updated_at_ms,
            round: r.round,
            outstanding: r.input_requests.len(),
            message: r.status_message.clone(),
            expires_at_ms: r.expires_at_ms(),
        }
    }

    /// What a client could tell apart between two versions.
    fn shown(&self) -> (TaskStatus, i64, u32, usize, Option<&str>) {
        (
            self.status,
            self.updated_at_ms,
            self.round,
            self.outstanding,
            self.message.as_deref(),
        )
    }
}
