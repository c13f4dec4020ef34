//! What sealing at rest (`SealedStore`, feature `seal`) costs a task, over
//! `MemoryStore` so that the sealing is not hidden behind a database round
//! trip; one core (current-thread runtime), 2026-07-28 requests built
//! outside the timed loop. Each bench runs on the plain store and on the
//! same store wrapped in a `SealedStore` (one key).
//!
//! - `seal/create_finished/{plain,sealed}`: a `tools/call` of a `Task` tool
//!   whose handler answers at once: one record written, finished, its
//!   ~100-byte result sealed.
//! - `seal/create_running/{plain,sealed}`: a `tools/call` of a `Task` tool
//!   whose handler has not answered: one `working` record written, its
//!   arguments and `_meta` sealed.
//! - `seal/get/{plain,sealed}`: `tasks/get` of a random completed task among
//!   1,000 (each opened: its result and status message).
//!
//! ```sh
//! cargo bench -p mcp-task-layer-benches --features seal --bench seal
//! ```
#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_task_layer::store::{SealKeyRing, SealedStore, TaskStore};
use mcp_task_layer::{Limits, MemoryStore, TaskLayer, TaskPolicy};
use tower::{service_fn, Layer, Service};

mod support;
use support::{call, get, inner, runtime, task_id_of, timed, XorShift};

const CHUNK: u64 = 256;

/// The two stores compared: plain, and sealed with one key.
fn stores() -> [(&'static str, Arc<dyn TaskStore>); 2] {
    let ring = SealKeyRing::single("k1", [7; 32]).expect("a key");
    [
        ("plain", Arc::new(MemoryStore::new())),
        (
            "sealed",
            Arc::new(SealedStore::new(MemoryStore::new(), ring)),
        ),
    ]
}

fn layer(store: Arc<dyn TaskStore>) -> TaskLayer {
    TaskLayer::new(store)
        .with_tool_policies([("work", TaskPolicy::Task), ("hang", TaskPolicy::Task)])
        .with_limits(Limits {
            max_tasks_per_owner: usize::MAX,
            ..Limits::default()
        })
}

fn seal(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("seal");
    g.throughput(Throughput::Elements(1));
    for (name, store) in stores() {
        let mut svc = layer(Arc::clone(&store)).layer(service_fn(inner));
        let req = call(1, "work");
        g.bench_function(format!("create_finished/{name}"), |b| {
            b.iter_custom(|iters| {
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |_| req.clone(),
                    async |r| {
                        task_id_of(&svc.call(r).await.unwrap());
                    },
                )
            })
        });
        let hang = call(1, "hang");
        g.bench_function(format!("create_running/{name}"), |b| {
            b.iter_custom(|iters| {
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |_| hang.clone(),
                    async |r| {
                        task_id_of(&svc.call(r).await.unwrap());
                    },
                )
            })
        });
        let ids: Vec<String> = rt.block_on(async {
            let mut ids = Vec::new();
            for i in 0..1_000 {
                ids.push(task_id_of(&svc.call(call(i, "work")).await.unwrap()));
            }
            ids
        });
        let first = rt.block_on(svc.call(get(1, &ids[0]))).unwrap();
        assert_eq!(first.result_value().unwrap()["status"], "completed");
        let mut rng = XorShift(42);
        g.bench_function(format!("get/{name}"), |b| {
            b.iter_custom(|iters| {
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |i| get(i as i64, &ids[rng.next_u64() as usize % ids.len()]),
                    async |r| {
                        std::hint::black_box(svc.call(r).await.unwrap());
                    },
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, seal);
criterion_main!(benches);
