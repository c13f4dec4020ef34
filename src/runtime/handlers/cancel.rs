//! `tasks/cancel`, both eras: the first terminal write wins, and the
//! handler's cancellation token is tripped.

use super::{respond, task_id_param, Reply};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use std::sync::Arc;

use crate::runtime::cas::{Decision, Outcome, Reader};
use crate::runtime::detach::run_to_completion;
use crate::runtime::engine::Engine;
use crate::runtime::{transition, wire};
use crate::store::{Era, TaskRecord};

impl Engine {
    /// Run to completion: once the cancel is written, the handler's token
    /// must be tripped even if the caller has gone.
    pub(crate) async fn tasks_cancel(
        self: Arc<Self>,
        req: JsonRpcRequest,
        era: Era,
    ) -> JsonRpcResponse {
        run_to_completion(Box::pin(async move {
            let answer = self.cancel(&req, era).await;
            respond(req.id, answer)
        }))
        .await
    }

    async fn cancel(&self, req: &JsonRpcRequest, era: Era) -> Result<Reply, JsonRpcError> {
        let task_id = task_id_param(req)?;
        let owner = self.owner_of(req);
        let written = self
            .compare_and_set(
                task_id,
                Reader::Caller {
                    owner: owner.as_deref(),
                    era,
                },
                |record| {
                    if !record.status.is_terminal() {
                        return Ok(Decision::Write(
                            transition::cancelled(record, self.now_ms()),
                            (),
                        ));
                    }
                    match era {
                        // Idempotent in 2026-07-28 (R45).
                        Era::Modern => Ok(Decision::Keep(())),
                        // An error in 2025-11-25 (R71).
                        _ => Err(JsonRpcError::invalid_params(format!(
                            "Cannot cancel task: already in terminal status '{}'",
                            record.status
                        ))),
                    }
                },
            )
            .await?;
        let Outcome::Wrote { prev, next, .. } = written else {
            return Ok(Reply::Ack);
        };
        self.after_cancel(&prev, &next);
        Ok(match era {
            Era::Legacy => Reply::Value(wire::legacy::task_value(&next)),
            _ => Reply::Ack,
        })
    }

    /// A cancel was written (by a client or an operator): publish it and
    /// trip the handler's token if it runs here. A handler on another
    /// replica stops when that replica hears of the change (its store's
    /// change feed, or its next lease heartbeat at the latest).
    pub(crate) fn after_cancel(&self, prev: &TaskRecord, next: &TaskRecord) {
        let local = self.registry.forget(&next.id);
        self.publish(prev.status, next, local.as_ref());
        if let Some(local) = local {
            local.token.cancel();
        }
    }
}
