//! `tasks/get` answered for an HTTP endpoint that reads it itself
//! ([`McpEndpoint::with_direct_tasks_get`](crate::McpEndpoint::with_direct_tasks_get)):
//! the same answers as the service's, without its call.

use std::sync::Arc;

use http::Extensions;

use crate::context::TaskOwner;
use crate::era::{serves, RequestEra};
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
        let era = match RequestEra::admit_tasks(req, &self.cfg.supported_versions) {
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
    pub(crate) fn tasks_get_plain(
        self: &Arc<Self>,
        id: &RequestId,
        task_id: &str,
        version: Option<&str>,
        extensions: &Extensions,
    ) -> PlainAnswer {
        // The owner read here is `default_owner`'s: a layer with its own
        // extractor reads it from a request.
        if self.cfg.owner.is_some() {
            return PlainAnswer::Decode;
        }
        let era = match version {
            Some(v) if serves(&self.cfg.supported_versions, v) => Era::Modern,
            Some(_) => return PlainAnswer::Decode,
            None => Era::Legacy,
        };
        self.ensure_background();
        let owner = extensions.get::<TaskOwner>().map(|o| o.0.as_str());
        match self.view_now(Some(id), task_id, owner, era) {
            Some(response) => PlainAnswer::Answer(response),
            None => PlainAnswer::Service,
        }
    }
}

/// What [`Engine::tasks_get_plain`] made of a `tasks/get`.
pub(crate) enum PlainAnswer {
    /// The answer, as the service's way gives it.
    Answer(JsonRpcResponse),
    /// The store must be waited for, or the record opened: the service's
    /// way, with no second try without the service.
    Service,
    /// Decoded, the request is answered without the service as any other
    /// [`tasks_get_now`](Engine::tasks_get_now) answers it: the layer
    /// reads owners with its own extractor, or the version is not served
    /// (its `-32022`).
    Decode,
}
