//! What `TaskLayer` adds to a request it does not turn into a task, measured
//! side by side in one run against the bare inner service.
//!
//! - `passthrough/{bare,layered}`: one `ping` (a method the layer does not
//!   intercept) through `ready().await` + `call(req).await` on a
//!   `tower::service_fn` that answers at once, bare and behind `TaskLayer`.
//!   The difference of the two is the layer's passthrough cost
//!   (target: at most 100 ns).
//! - `auto_call/{bare,layered}`: one `tools/call` of a tool with policy
//!   `Auto { within: 1 s }` whose handler answers at once, so the layer
//!   answers synchronously. The difference is the cost of the `Auto` path
//!   (target: at most 1 µs).
//!
//! The inner service is `support::keep`: it answers with an empty result
//! object and keeps the request, so that building and freeing the request's
//! JSON (identical on both sides, and about 2 µs) stays out of the measured
//! time and the difference is not lost in allocator noise. Requests are
//! 2026-07-28 requests. One core (current-thread runtime).

#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_task_layer::{JsonRpcRequest, MemoryStore, TaskLayer, TaskPolicy};
use tower::{service_fn, Layer, Service, ServiceExt};

mod support;
use support::{call, drop_kept, keep, ping, runtime, timed};

const CHUNK: u64 = 64;

fn bench_pair<S, T>(
    c: &mut Criterion,
    group: &str,
    req: JsonRpcRequest,
    mut bare: S,
    mut layered: T,
) where
    S: Service<JsonRpcRequest, Response = mcp_task_layer::JsonRpcResponse>,
    S::Error: std::fmt::Debug,
    T: Service<JsonRpcRequest, Response = mcp_task_layer::JsonRpcResponse>,
    T::Error: std::fmt::Debug,
{
    let rt = runtime();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| {
            timed(
                &rt,
                iters,
                CHUNK,
                |_| prepare(&req),
                async |r| {
                    let resp = bare.ready().await.unwrap().call(r).await.unwrap();
                    std::hint::black_box(resp);
                },
            )
        })
    });
    g.bench_function("layered", |b| {
        b.iter_custom(|iters| {
            timed(
                &rt,
                iters,
                CHUNK,
                |_| prepare(&req),
                async |r| {
                    let resp = layered.ready().await.unwrap().call(r).await.unwrap();
                    std::hint::black_box(resp);
                },
            )
        })
    });
    g.finish();
}

/// A request to send, made while the previous chunk's kept requests are
/// freed: both out of the measured time.
fn prepare(req: &JsonRpcRequest) -> JsonRpcRequest {
    drop_kept();
    req.clone()
}

fn passthrough(c: &mut Criterion) {
    let bare = service_fn(keep);
    let layered = TaskLayer::new(MemoryStore::new()).layer(service_fn(keep));
    bench_pair(c, "passthrough", ping(1), bare, layered);
}

fn auto_call(c: &mut Criterion) {
    let bare = service_fn(keep);
    let layered = TaskLayer::new(MemoryStore::new())
        .with_tool_policy(
            "echo",
            TaskPolicy::Auto {
                within: Duration::from_secs(1),
            },
        )
        .layer(service_fn(keep));
    bench_pair(c, "auto_call", call(1, "echo"), bare, layered);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = passthrough, auto_call
}
criterion_main!(benches);
