//! `tasks/get`, both eras: the task as the caller's era shows it.

use std::sync::Arc;

use super::{respond, task_id_param, Reply};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::runtime::engine::Engine;
use crate::runtime::errors::{store_failure, task_not_found};
use crate::runtime::wire;
use crate::store::{Era, TaskRecord, TaskView, ViewQuery};

impl Engine {
    pub(crate) async fn tasks_get(&self, req: JsonRpcRequest, era: Era) -> JsonRpcResponse {
        let answer = async {
            let task_id = task_id_param(&req)?;
            let owner = self.owner_of(&req);
            let record = self.lookup(task_id, owner.as_deref(), era).await?;
            get_body(record, era)
        };
        let answer = answer.await;
        respond(req.id, answer)
    }

    /// `tasks/get` answered without waiting if the store can read so
    /// (`None` if it cannot). The store shows the task as a view (no record
    /// built); what the answer says is what [`tasks_get`](Self::tasks_get)
    /// would say, and a record with sealed fields goes that way.
    pub(crate) fn tasks_get_ready(
        &self,
        req: &JsonRpcRequest,
        era: Era,
    ) -> Option<JsonRpcResponse> {
        match task_id_param(req) {
            Ok(task_id) => {
                let owner = self.owner_of(req);
                self.view_now(req.id.as_ref(), task_id, owner.as_deref(), era)
            }
            Err(e) => Some(respond(req.id.clone(), Err(e))),
        }
    }

    /// [`tasks_get_ready`](Self::tasks_get_ready) of `task_id` for
    /// `owner`, the answer's id `id`.
    pub(super) fn view_now(
        &self,
        id: Option<&RequestId>,
        task_id: &str,
        owner: Option<&str>,
        era: Era,
    ) -> Option<JsonRpcResponse> {
        let mut answer = None;
        let mut show = |view: Option<TaskView<'_>>| {
            answer = match view {
                Some(v) if v.sealed => None,
                found => {
                    // As `saw` and `visible` for a record.
                    if found.is_none_or(|v| v.status.is_terminal()) {
                        self.forget_ended(task_id, found.as_ref());
                    }
                    Some(match found {
                        Some(v) if v.owner == owner && v.era == era => {
                            Ok(wire::get_response(id.cloned(), &v, era))
                        }
                        _ => Err(task_not_found()),
                    })
                }
            };
        };
        let query = ViewQuery {
            id: task_id,
            now_ms: self.now_ms(),
            show: &mut show,
        };
        let answer = match self.store.view_ready(query) {
            None => None,
            Some(Ok(())) => answer,
            Some(Err(e)) => Some(Err(store_failure(&e))),
        };
        match answer? {
            Ok(response) => Some(response),
            Err(e) => Some(respond(id.cloned(), Err(e))),
        }
    }
}

/// The `tasks/get` result of what a lookup found.
fn get_body(record: Option<Arc<TaskRecord>>, era: Era) -> Result<Reply, JsonRpcError> {
    let record = record.ok_or_else(task_not_found)?;
    Ok(Reply::Text(wire::get_result(&record.view(), era)))
}
