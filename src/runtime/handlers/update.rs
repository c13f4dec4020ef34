//! `tasks/update` (2026-07-28): answers to a task's input requests.

use std::sync::Arc;

use serde_json::Value;

use super::{respond, task_id_param, Reply};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::runtime::detach::run_to_completion;
use crate::runtime::engine::{Engine, InnerService};
use crate::store::Era;

impl Engine {
    pub(crate) async fn tasks_update<S: InnerService>(
        self: Arc<Self>,
        svc: S,
        req: JsonRpcRequest,
    ) -> JsonRpcResponse {
        let id = req.id.clone();
        let answered = async move {
            let task_id = task_id_param(&req)?;
            let answers = match req.params_object().and_then(|p| p.get("inputResponses")) {
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(JsonRpcError::invalid_params(
                        "\"inputResponses\" must be an object",
                    ))
                }
                None => return Err(JsonRpcError::invalid_params("missing \"inputResponses\"")),
            };
            self.cfg.limits.check_answers(answers)?;
            let owner = self.owner_of(&req);
            self.accept_answers(svc, task_id, owner.as_deref(), Era::Modern, answers)
                .await?;
            Ok(Reply::Ack)
        };
        // Boxed (see BENCHMARKS.md on futures of 1 KB and more) and run to
        // completion: once the answers are written, the handler must resume
        // even if the caller has gone.
        respond(id, run_to_completion(Box::pin(answered)).await)
    }
}
