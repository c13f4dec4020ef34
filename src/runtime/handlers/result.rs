//! `tasks/result` (2025-11-25): wait for the task to end and answer with
//! its result; meanwhile deliver its input requests to the client through
//! the transport's peer.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{respond, task_id_param, Reply};
use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::peer::Peer;
use crate::protocol::{TaskStatus, META_RELATED_TASK};
use crate::runtime::detach::run_to_completion;
use crate::runtime::engine::{Engine, InnerService};
use crate::runtime::errors::task_not_found;
use crate::runtime::wire;
use crate::store::{Era, TaskOutcome, TaskRecord};

impl Engine {
    /// `tasks/result`: wait until the task is terminal, woken by task events
    /// (and by its expiry), then answer with its result or its error. While
    /// the task waits for input and the transport gave a [`Peer`], send its
    /// input requests to the client as real requests and feed the answers
    /// back, exactly as `tasks/update` does.
    pub(crate) async fn tasks_result<S: InnerService>(
        self: Arc<Self>,
        svc: S,
        req: JsonRpcRequest,
    ) -> JsonRpcResponse {
        let answer = self.result_inner(svc, &req).await.map(Reply::Value);
        respond(req.id, answer)
    }

    async fn result_inner<S>(
        self: &Arc<Self>,
        svc: S,
        req: &JsonRpcRequest,
    ) -> Result<Value, JsonRpcError>
    where
        S: InnerService,
    {
        let task_id = task_id_param(req)?;
        let owner = self.owner_of(req);
        let peer = req.extensions.get::<Peer>().cloned();
        // Watched before the first read, so no write falls in between; only
        // this task's writes wake this waiter.
        let mut watch = self.hub.watchers.watch(task_id);
        let mut notified: Option<(TaskStatus, u64)> = None;
        loop {
            let record = self
                .lookup(task_id, owner.as_deref(), Era::Legacy)
                .await?
                .ok_or_else(task_not_found)?;
            if let Some(peer) = &peer {
                if notified.is_some() && notified != Some((record.status, record.version)) {
                    let params = wire::legacy::task_value(&record);
                    peer.notify("notifications/tasks/status".into(), params)
                        .await;
                }
            }
            notified = Some((record.status, record.version));
            match (record.status, &record.outcome) {
                (TaskStatus::Completed | TaskStatus::Failed, Some(TaskOutcome::Result(result))) => {
                    let mut result = result.to_object();
                    relate_to_task(&mut result, &record.id);
                    return Ok(Value::Object(result));
                }
                (TaskStatus::Failed, Some(TaskOutcome::Error(e))) => return Err(e.clone()),
                (status, _) if status.is_terminal() => {
                    return Err(JsonRpcError::new(
                        code::INTERNAL_ERROR,
                        format!("The task ended {status} and has no result"),
                    )
                    .with_data(json!({ "taskId": record.id, "status": status })))
                }
                _ => {}
            }
            // Wait for a change of this task, or its expiry: reaping is no
            // write anyone hears of, so the timer is what ends the wait.
            let expiry = record.expires_at_ms().map(|at| {
                let left = u64::try_from(at.saturating_sub(self.now_ms())).unwrap_or(0);
                tokio::time::Instant::now() + Duration::from_millis(left)
            });
            let expired = async {
                match expiry {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(expired);
            if let (TaskStatus::InputRequired, Some(peer)) = (record.status, &peer) {
                // A client that never answers must not hold the call past
                // the task's end either.
                tokio::select! {
                    delivered = self.deliver_inputs(svc.clone(), peer, &record, owner.as_deref()) => {
                        delivered?;
                    }
                    () = &mut expired => {}
                }
                continue;
            }
            // Without a change feed, another replica's write shows up only
            // when read again.
            let resync = async {
                match self.resync_period() {
                    Some(period) => tokio::time::sleep(period).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(resync);
            tokio::select! {
                () = &mut resync => {}
                () = watch.changed() => {}
                () = &mut expired => {}
            }
        }
    }

    /// Send each outstanding input request of a 2025-11-25 task to the
    /// client through `peer`, tagged with the related-task `_meta`, and
    /// record each answer as it comes.
    async fn deliver_inputs<S>(
        self: &Arc<Self>,
        svc: S,
        peer: &Peer,
        record: &TaskRecord,
        owner: Option<&str>,
    ) -> Result<(), JsonRpcError>
    where
        S: InnerService,
    {
        for (key, pending) in &record.input_requests {
            let mut params = pending.request.params.clone().unwrap_or_default();
            relate_to_task(&mut params, &record.id);
            let answer = peer
                .request(pending.request.method.clone(), Value::Object(params))
                .await
                .map_err(|client_error| {
                    // The client refused or failed the input request: say so
                    // as the layer, so it cannot read as "no tasks/result".
                    JsonRpcError::internal("the client did not answer the task's input request")
                        .with_data(json!({
                            "taskId": record.id,
                            "status": TaskStatus::InputRequired,
                            "clientError": client_error,
                        }))
                })?;
            let mut answers = Map::new();
            answers.insert(key.clone(), answer);
            self.cfg.limits.check_answers(&answers)?;
            // Run to completion: once the answer is written, the handler
            // must resume even if the waiting client has gone.
            let engine = Arc::clone(self);
            let (svc, id, owner) = (svc.clone(), record.id.clone(), owner.map(str::to_owned));
            run_to_completion(Box::pin(async move {
                engine
                    .accept_answers(svc, &id, owner.as_deref(), Era::Legacy, &answers)
                    .await
            }))
            .await?;
        }
        Ok(())
    }
}

/// Tie a message's `params` (or result) to its task with the related-task
/// `_meta` entry.
fn relate_to_task(object: &mut Map<String, Value>, task_id: &str) {
    let meta = object
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(META_RELATED_TASK.into(), json!({ "taskId": task_id }));
    }
}
