//! `tasks/get`, both eras: the task as the caller's era shows it.

use std::sync::Arc;

use super::{respond, task_id_param, Reply};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
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

    /// `tasks/get` answered without waiting if the store can read so, or
    /// the request back. The store shows the task as a view (no record
    /// built); what the answer says is what [`tasks_get`](Self::tasks_get)
    /// would say, and a record with sealed fields goes that way.
    pub(crate) fn tasks_get_ready(
        &self,
        req: JsonRpcRequest,
        era: Era,
    ) -> Result<JsonRpcResponse, JsonRpcRequest> {
        let task_id = match task_id_param(&req) {
            Ok(task_id) => task_id,
            Err(e) => return Ok(respond(req.id, Err(e))),
        };
        let mut answer = None;
        let mut show = |view: Option<TaskView<'_>>| {
            answer = match view {
                Some(v) if v.sealed => None,
                found => {
                    // As `saw` and `visible` for a record.
                    if found.is_none_or(|v| v.status.is_terminal()) {
                        self.registry.forget_ended(task_id);
                    }
                    let owner = self.owner_of(&req);
                    Some(match found {
                        Some(v) if v.owner == owner.as_deref() && v.era == era => {
                            Ok(wire::get_response(req.id.clone(), &v, era))
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
        match answer {
            Some(Ok(response)) => Ok(response),
            Some(Err(e)) => Ok(respond(req.id, Err(e))),
            None => Err(req),
        }
    }
}

/// The `tasks/get` result of what a lookup found.
fn get_body(record: Option<Arc<TaskRecord>>, era: Era) -> Result<Reply, JsonRpcError> {
    let record = record.ok_or_else(task_not_found)?;
    Ok(Reply::Text(wire::get_result(&record.view(), era)))
}
