//! `tasks/get`, both eras: the task as the caller's era shows it.

use std::sync::Arc;

use super::{respond, task_id_param, Reply};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::runtime::engine::{visible, Engine};
use crate::runtime::errors::task_not_found;
use crate::runtime::wire;
use crate::store::{Era, TaskRecord};

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
    /// the request back.
    pub(crate) fn tasks_get_ready(
        &self,
        req: JsonRpcRequest,
        era: Era,
    ) -> Result<JsonRpcResponse, JsonRpcRequest> {
        let answer = match task_id_param(&req) {
            Err(e) => Err(e),
            Ok(task_id) => match self.store.get_ready(task_id, self.now_ms()) {
                None => return Err(req),
                Some(found) => {
                    let found = crate::store::opened_found(found);
                    self.saw(task_id, &found);
                    let owner = self.owner_of(&req);
                    visible(found, owner.as_deref(), era).and_then(|r| get_body(r, era))
                }
            },
        };
        Ok(respond(req.id, answer))
    }
}

/// The `tasks/get` result of what a lookup found.
fn get_body(record: Option<Arc<TaskRecord>>, era: Era) -> Result<Reply, JsonRpcError> {
    let record = record.ok_or_else(task_not_found)?;
    Ok(Reply::Text(wire::get_result(&record, era)))
}
