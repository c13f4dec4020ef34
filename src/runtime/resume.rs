//! Resuming a task: answers merged in, exactly once per round, and the
//! handler called again from the top with everything accumulated.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::cas::{Decision, Outcome, Reader};
use super::engine::{Engine, InnerService};
use super::runner::{HandlerRun, InnerFuture};
use super::status::TaskHandle;
use super::transition;
use crate::context::{TaskId, TaskOwner, TaskResumeContext};
use crate::json::JsonText;
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest};
use crate::protocol::TaskStatus;
use crate::store::{Era, TaskRecord};

impl Engine {
    /// Merge the outstanding ones among `answers` into the task, and when
    /// that answers the last outstanding key, resume the handler. Only the
    /// writer that wins `input_required → working` resumes it: exactly once
    /// per round, however many answers race.
    pub(crate) async fn accept_answers<S>(
        self: &Arc<Self>,
        svc: S,
        task_id: &str,
        owner: Option<&str>,
        era: Era,
        answers: &Map<String, Value>,
    ) -> Result<(), JsonRpcError>
    where
        S: InnerService,
    {
        let max = self.cfg.limits.max_accumulated_responses;
        let written = self
            .compare_and_set(task_id, Reader::Caller { owner, era }, |record| {
                let Some(next) =
                    transition::apply_answers(record, answers, self.now_ms(), self.run_terms())
                else {
                    // Nothing outstanding was answered: ack and change
                    // nothing (R33, R40).
                    return Ok(Decision::Keep(()));
                };
                if next.input_responses.len() > max {
                    return Err(JsonRpcError::invalid_params(format!(
                        "the task has accumulated more than {max} answers"
                    )));
                }
                Ok(Decision::Write(next, ()))
            })
            .await?;
        let Outcome::Wrote { prev, next, .. } = written else {
            return Ok(());
        };
        if next.status != TaskStatus::Working {
            self.publish(prev.status, &next, self.registry.get(&next.id).as_ref());
            return Ok(());
        }
        if self.queued() {
            // A worker runs the next round.
            self.publish(prev.status, &next, self.registry.get(&next.id).as_ref());
            self.wake_workers();
            return Ok(());
        }
        let local = self.registry.get_or_track(&next);
        self.publish(prev.status, &next, Some(&local));
        let request = self.resume_request(&next, &local.token);
        let fut: InnerFuture<S::Error> = Box::pin(svc.clone().oneshot(request));
        let fence = next.lease.as_ref().map_or(0, |l| l.fence);
        let run = HandlerRun::fenced(fence).resumed_now();
        Box::pin(self.drive(svc, next.id.clone(), local, fut, run, next.era)).await;
        Ok(())
    }

    /// The `tools/call` that re-invokes the handler from the top.
    pub(crate) fn resume_request(
        &self,
        r: &TaskRecord,
        token: &CancellationToken,
    ) -> JsonRpcRequest {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(r.tool_name.clone()));
        let arguments = r
            .arguments
            .as_ref()
            .map_or_else(|| json!({}), JsonText::to_value);
        params.insert("arguments".into(), arguments.clone());
        if !r.input_responses.is_empty() {
            let answers: Map<String, Value> = r
                .input_responses
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            params.insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(state) = &r.request_state {
            params.insert("requestState".into(), Value::String(state.clone()));
        }
        if let Some(meta) = &r.meta {
            params.insert("_meta".into(), meta.to_value());
        }
        let mut req = JsonRpcRequest::new(
            format!("mcp-task-layer:{}:{}", r.id, r.round),
            "tools/call",
            Value::Object(params),
        );
        let context =
            TaskResumeContext::new(r.tool_name.clone(), arguments, r.input_responses.clone())
                .with_cancellation_token(token.clone());
        req.extensions.insert(context);
        req.extensions.insert(token.clone());
        req.extensions.insert(TaskId(r.id.clone()));
        let fence = r.lease.as_ref().map_or(0, |l| l.fence);
        req.extensions
            .insert(TaskHandle::bound(&self.me, &r.id, fence, token.clone()));
        if let Some(owner) = &r.owner {
            req.extensions.insert(TaskOwner(owner.clone()));
        }
        req
    }
}
