//! What a task write costs with many `subscriptions/listen` streams open
//! (issue #28): one busy task answered round after round while 0 or 1,000
//! streams watch other tasks (each its own task, waiting for input, which
//! never changes). One core (current-thread runtime), so the streams' work
//! on each write is in the measured time.
//!
//! - `fanout/input_round/{0,1000}_streams`: `tasks/update` of a busy task
//!   waiting for input and the wait until its handler has asked again (two
//!   writes: `working`, then `input_required`); each iteration answers a
//!   task of its own, made beforehand (untimed), as `tasks`'s
//!   `input_round` does.
//!
//! A write should cost work proportional to the subscribers of its task,
//! not to every open stream: the two figures should be close.
//!
//! ```sh
//! cargo bench -p mcp-task-layer-benches --bench fanout
//! ```
#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_task_layer::store::BoxFuture;
use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, MemoryStore, Peer, TaskLayer, TaskPolicy, TaskStatus,
};
use serde_json::{json, Value};
use tower::{service_fn, Layer, Service};

mod support;
use support::{inner, meta, runtime, tasks_waiting_for_input, timed, uncapped, update, wait_for};

const CHUNK: u64 = 256;

/// A client that reads every notification at once and counts the
/// subscriptions acknowledged.
struct Sink(Arc<AtomicUsize>);

impl ClientPeer for Sink {
    fn request(&self, _: String, _: Value) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(async { Err(JsonRpcError::internal("no requests")) })
    }

    fn notify(&self, method: String, _: Value) -> BoxFuture<'static, ()> {
        if method == "notifications/subscriptions/acknowledged" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(async {})
    }
}

fn listen(id: i64, task_id: &str, acked: &Arc<AtomicUsize>) -> JsonRpcRequest {
    let mut req = JsonRpcRequest::new(
        id,
        "subscriptions/listen",
        json!({ "notifications": { "taskIds": [task_id] }, "_meta": meta() }),
    );
    req.extensions.insert(Peer::new(Sink(Arc::clone(acked))));
    req
}

fn fanout(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("fanout");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20);
    for streams in [0u64, 1_000] {
        let store = MemoryStore::new();
        let layer =
            uncapped(TaskLayer::new(store.clone())).with_tool_policy("ask", TaskPolicy::Task);
        let mut svc = layer.layer(service_fn(inner));
        // Untimed: the watched tasks, waiting for `q`; one stream on each,
        // acknowledged.
        let ids = rt.block_on(tasks_waiting_for_input(&svc, &store, streams));
        let acked = Arc::new(AtomicUsize::new(0));
        let _guard = rt.enter();
        for (i, id) in ids.iter().enumerate() {
            let mut svc = svc.clone();
            let req = listen(i as i64, id, &acked);
            tokio::spawn(async move { svc.call(req).await });
        }
        rt.block_on(async {
            while acked.load(Ordering::SeqCst) < ids.len() {
                tokio::task::yield_now().await;
            }
        });
        g.bench_function(format!("input_round/{streams}_streams"), |b| {
            b.iter_custom(|iters| {
                // Untimed: `iters` busy tasks waiting for `q`, answered one
                // after the other.
                let busy = rt.block_on(tasks_waiting_for_input(&svc, &store, iters));
                let mut rx = layer.subscribe();
                let mut next = busy.iter();
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |i| {
                        let id = next.next().unwrap().clone();
                        (update(i as i64, &id, "q"), id)
                    },
                    async |(r, id)| {
                        let ack = svc.call(r).await.unwrap();
                        debug_assert!(ack.result_value().is_some(), "{ack:?}");
                        wait_for(&mut rx, &id, TaskStatus::InputRequired).await;
                    },
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
