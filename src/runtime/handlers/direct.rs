//! `tasks/get` answered for an HTTP endpoint that reads it itself
//! ([`McpEndpoint::with_direct_tasks_get`](crate::McpEndpoint::with_direct_tasks_get)):
//! the same answers as the service's, without its call.

use std::sync::Arc;

use http::Extensions;

use crate::context::TaskOwner;
use crate::era::RequestEra;
use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::runtime::engine::Engine;
use crate::store::Era;

impl Engine {
    /// A `tasks/get` answered as [`TaskService`](crate::TaskService)
    /// answers it, if that takes no waiting: the era's admission (its
    /// errors are answers too), then [`tasks_get_ready`](Self::tasks_get_ready).
    /// `None`: the store must be waited for, and the request goes the
    /// service's way. What an endpoint built with
    /// [`McpEndpoint::with_direct_tasks_get`](crate::McpEndpoint::with_direct_tasks_get)
    /// calls, without a call of the service.
    pub(crate) fn tasks_get_now(self: &Arc<Self>, req: &JsonRpcRequest) -> Option<JsonRpcResponse> {
        let era = match RequestEra::admitted(req, &self.cfg.supported_versions)
            .and_then(|era| era.admit_tasks_method(&req.method))
        {
            Ok(era) => era,
            Err(e) => return Some(JsonRpcResponse::error(req.id.clone(), e)),
        };
        self.ensure_background();
        self.tasks_get_ready(req, era)
    }

    /// A `tasks/get` already read, as [`tasks_get_now`](Self::tasks_get_now)
    /// answers it: task `task_id` with the answer's id `id`, for the owner
    /// of `extensions` (a [`TaskOwner`]), asked in the 2026-07-28 era with
    /// the tasks extension declared (`version`) or in 2025-11-25 (`None`).
    /// `None` when the request must go the service's way: the store must
    /// be waited for, the layer reads owners its own way, or the version
    /// is not served (whose error that way writes).
    pub(crate) fn tasks_get_plain(
        self: &Arc<Self>,
        id: &RequestId,
        task_id: &str,
        version: Option<&str>,
        extensions: &Extensions,
    ) -> Option<JsonRpcResponse> {
        if self.cfg.custom_owner {
            return None;
        }
        let era = match version {
            Some(v) if self.cfg.supported_versions.iter().any(|s| s == v) => Era::Modern,
            Some(_) => return None,
            None => Era::Legacy,
        };
        self.ensure_background();
        let owner = extensions.get::<TaskOwner>().map(|o| o.0.as_str());
        self.view_now(Some(id), task_id, owner, era)
    }
}
