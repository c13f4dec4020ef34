//! Durable, asynchronous MCP tasks for any JSON-RPC [`tower`] service.
//!
//! [`TaskLayer`] wraps the user's MCP server (a
//! `Service<JsonRpcRequest, Response = JsonRpcResponse>`). It handles
//! `tools/call` and the `tasks/*` methods of the 2026-07-28 tasks extension
//! (`io.modelcontextprotocol/tasks`), keeps task state in a pluggable
//! [`TaskStore`], and lets everything else through untouched.
//!
//! The inner server never has to know about tasks: it answers `tools/call`
//! with a result, a JSON-RPC error, or an MRTR `input_required` result. When
//! a task waits for input and the client answers with `tasks/update`, the
//! layer calls the handler again from the top with the original arguments
//! and every answer so far, plus a [`TaskResumeContext`] in the request
//! extensions.
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//! use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, MemoryStore, TaskLayer, TaskPolicy};
//! use serde_json::json;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = service_fn(|req: JsonRpcRequest| async move {
//!     // The user's MCP server: here every call answers at once.
//!     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(
//!         req.id,
//!         json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]}),
//!     ))
//! });
//! let svc = ServiceBuilder::new()
//!     .layer(
//!         TaskLayer::new(MemoryStore::new())
//!             .with_tool_policy("report", TaskPolicy::Auto { within: Duration::from_millis(100) }),
//!     )
//!     .service(server);
//!
//! let call = JsonRpcRequest::new(1, "tools/call", json!({
//!     "name": "report",
//!     "arguments": {},
//!     "_meta": {
//!         "io.modelcontextprotocol/protocolVersion": "2026-07-28",
//!         "io.modelcontextprotocol/clientCapabilities": {
//!             "extensions": {"io.modelcontextprotocol/tasks": {}}
//!         }
//!     }
//! }));
//! let resp = svc.oneshot(call).await.unwrap();
//! // It finished within its budget, so it came back synchronously.
//! assert_eq!(resp.result_value().unwrap()["resultType"], "complete");
//! # }
//! ```
//!
//! # Feature flags
//!
//! None is on by default: the core (layer, [`MemoryStore`], client poll
//! loop) needs none of them.
//!
//! | feature | what it adds |
//! |---|---|
//! | `axum` | `McpEndpoint`: a Streamable HTTP endpoint for any `Service<JsonRpcRequest>` |
//! | `http-client` | `client::HttpTransport`: call remote MCP servers over Streamable HTTP |
//! | `metrics` | task counters, gauges and histograms through the `metrics` facade |
//! | `sqlite` | `store::SqliteStore`: tasks in a SQLite file (bundled SQLite, through sqlx) |
//! | `postgres` | `store::PostgresStore`: tasks in PostgreSQL, shared by every replica |
//! | `stdio` | `StdioTransport`: serve any `Service<JsonRpcRequest>` over newline-delimited JSON-RPC on stdin/stdout |
//! | `seal` | `store::SealedStore`: tasks' arguments, answers and results encrypted at rest in any store |
//! | `rmcp` | `RmcpService`: an rmcp (official Rust SDK) `ServerHandler` as the inner service, unchanged |
//! | `dashboard` | `dashboard::Dashboard`: an operator's web dashboard, an axum `Router` to nest (implies `axum`) |
//!
//! # Where things are
//!
//! `ARCHITECTURE.md` maps the modules; requirement numbers (R1..R78) in
//! docs and tests refer to `docs/requirements.md`.
//!
//! # Requests the layer handles
//!
//! See the README for the full table of methods, eras and error codes.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod adapter;
mod advertise;
pub mod client;
mod clock;
mod config;
mod context;
#[cfg(feature = "dashboard")]
#[cfg_attr(docsrs, doc(cfg(feature = "dashboard")))]
pub mod dashboard;
mod era;
mod future;
#[cfg(feature = "gateway")]
#[cfg_attr(docsrs, doc(cfg(feature = "gateway")))]
pub mod gateway;
mod hashing;
mod hex;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
mod http;
mod json;
pub mod jsonrpc;
mod layer;
mod limits;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod metrics;
mod names;
mod peer;
#[cfg(any(feature = "axum", feature = "stdio"))]
mod pending;
pub mod protocol;
mod runtime;
mod service;
#[cfg(feature = "stdio")]
#[cfg_attr(docsrs, doc(cfg(feature = "stdio")))]
mod stdio;
pub mod store;
#[cfg(feature = "gateway")]
mod upstream;
mod words;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use self::http::{
    serve, McpEndpoint, McpService, Serve, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
};
#[cfg(feature = "rmcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "rmcp")))]
pub use adapter::rmcp::RmcpService;
pub use config::{Execution, Recovery, TaskPolicy};
pub use context::{TaskId, TaskOwner, TaskResumeContext};
pub use future::ResponseFuture;
pub use json::JsonText;
pub use jsonrpc::{
    IdentityRefusal, JsonRpcError, JsonRpcRequest, JsonRpcResponse, Params, RequestId,
};
pub use layer::TaskLayer;
pub use limits::Limits;
pub use peer::{ClientPeer, Peer};
pub use protocol::{
    DetailedTask, InputRequest, InputRequests, InputResponses, Task, TaskMetadata,
    TaskPollDecision, TaskStatus,
};
pub use runtime::{
    CancelOutcome, DrainReport, Operator, TaskEvent, TaskHandle, TaskWorker,
    MAX_STATUS_MESSAGE_BYTES,
};
pub use service::TaskService;
#[cfg(feature = "stdio")]
#[cfg_attr(docsrs, doc(cfg(feature = "stdio")))]
pub use stdio::{StdioTransport, DEFAULT_LINE_LIMIT};
pub use store::{MemoryStore, TaskStore};
pub use tokio_util::sync::CancellationToken;
