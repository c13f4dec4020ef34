//! What `RmcpService` costs: the same tools as a plain `Service` (the
//! `tower::service_fn` of `support::inner`) and as an rmcp server behind
//! `RmcpService`, both behind `TaskLayer` over `MemoryStore`, one core
//! (current-thread runtime), 2026-07-28 requests built outside the timing.
//!
//! - `rmcp_passthrough/{plain,rmcp}`: one `tools/call` of `echo`
//!   (`TaskPolicy::Sync`, so the layer lets it through), answering a
//!   ~100-byte text result. The difference is the adapter's cost per
//!   passthrough call: decoding into rmcp's `ClientRequest`, rmcp's
//!   dispatch and tool router, encoding its `CallToolResult`.
//! - `rmcp_passthrough/rmcp_with_peer`: the same call with a transport
//!   `Peer` in the request (as over HTTP or stdio): the adapter then starts
//!   an rmcp service loop for the call, so that the handler's messages reach
//!   the client.
//! - `rmcp_create/{plain,rmcp}`: task creation as in
//!   `tasks`' `create/layer_task_call`: a `tools/call` of `work`
//!   (`TaskPolicy::Task`) whose handler answers at once, timed until the
//!   runners have written every task of the chunk.

#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, MemoryStore, Peer, RmcpService,
    TaskLayer, TaskPolicy,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use serde_json::Value;
use tower::{service_fn, Layer, Service, ServiceExt};

mod support;
use support::{call, inner, runtime, time_creations, timed};

const CHUNK: u64 = 256;

/// `echo` and `work` as rmcp tools, answering what `support::inner` does:
/// about 100 bytes of text.
#[derive(Clone)]
struct Tools {
    tool_router: ToolRouter<Self>,
}

fn result_100b() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text("x".repeat(64))])
}

#[tool_router]
impl Tools {
    fn new() -> Self {
        Tools {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Answers at once.")]
    async fn echo(&self) -> CallToolResult {
        result_100b()
    }

    #[tool(description = "Answers at once.")]
    async fn work(&self) -> CallToolResult {
        result_100b()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn layer() -> TaskLayer {
    TaskLayer::new(MemoryStore::new())
        .with_tool_policy("echo", TaskPolicy::Sync)
        .with_tool_policy("work", TaskPolicy::Task)
}

/// A transport peer that is never used.
struct Idle;

impl ClientPeer for Idle {
    fn request(
        &self,
        _method: String,
        _params: Value,
    ) -> mcp_task_layer::store::BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(async { Err(JsonRpcError::internal("idle")) })
    }

    fn notify(
        &self,
        _method: String,
        _params: Value,
    ) -> mcp_task_layer::store::BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

fn passthrough_one<S>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    svc: S,
    req: JsonRpcRequest,
) where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone,
    S::Error: std::fmt::Debug,
{
    let rt = runtime();
    let mut svc = svc;
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            timed(
                &rt,
                iters,
                64,
                |_| req.clone(),
                async |r| {
                    let resp = svc.ready().await.unwrap().call(r).await.unwrap();
                    std::hint::black_box(resp);
                },
            )
        })
    });
}

fn passthrough(c: &mut Criterion) {
    let mut g = c.benchmark_group("rmcp_passthrough");
    g.throughput(Throughput::Elements(1));
    let req = call(1, "echo");
    passthrough_one(
        &mut g,
        "plain",
        layer().layer(service_fn(inner)),
        req.clone(),
    );
    passthrough_one(
        &mut g,
        "rmcp",
        layer().layer(RmcpService::new(Tools::new())),
        req.clone(),
    );
    let mut with_peer = req;
    with_peer.extensions.insert(Peer::new(Idle));
    passthrough_one(
        &mut g,
        "rmcp_with_peer",
        layer().layer(RmcpService::new(Tools::new())),
        with_peer,
    );
    g.finish();
}

/// Calls of `work` in chunks of [`CHUNK`], each timed until its last task
/// is `completed` in `store`.
fn create_one<S>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    make: impl Fn(MemoryStore) -> S,
) where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse>,
    S::Error: std::fmt::Debug,
{
    let rt = runtime();
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let store = MemoryStore::new();
            let mut svc = make(store.clone());
            let req = call(1, "work");
            rt.block_on(time_creations(&mut svc, &store, &req, iters, CHUNK))
        })
    });
}

fn create(c: &mut Criterion) {
    let mut g = c.benchmark_group("rmcp_create");
    g.throughput(Throughput::Elements(1));
    let on = |store: MemoryStore| TaskLayer::new(store).with_tool_policy("work", TaskPolicy::Task);
    create_one(&mut g, "plain", |store| on(store).layer(service_fn(inner)));
    create_one(&mut g, "rmcp", |store| {
        on(store).layer(RmcpService::new(Tools::new()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = passthrough, create
}
criterion_main!(benches);
