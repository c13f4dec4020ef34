//! The task paths of `TaskLayer` over `MemoryStore`, one core
//! (current-thread runtime) unless a name says otherwise. Every request is a
//! 2026-07-28 request declaring the tasks extension, built outside the timed
//! loop.
//!
//! - `create/layer_task_call`: task creation throughput through the layer: a
//!   `tools/call` of a `TaskPolicy::Task` tool whose handler answers at
//!   once, so each call stores a task and the layer records the result. Timed until the runners have written their tasks,
//!   in chunks of 256 calls (fewer unfinished tasks than the per-owner cap).
//!   Target: at least 300k tasks/s.
//! - `create/store_direct`: `TaskStore::create` of a prebuilt record, the
//!   store's share of the above.
//! - `create/handler_still_running`: latency of a `tools/call` of a `Task`
//!   tool whose handler has not answered yet (it never does): the time until
//!   the layer answers with the task. Not a target; it shows what the
//!   default zero task window costs.
//! - `get/layer/{1000,100000,1000000}`: one `tasks/get` through the layer of
//!   a random task among N live completed tasks (each with a ~100-byte
//!   result). Targets: at least 1M/s at 1M tasks, latency within 2x from 1k
//!   to 1M tasks.
//! - `get/layer_2threads/1000000`: the same on both cores at once (two
//!   threads, one runtime each, one shared layer); throughput is the sum.
//! - `get/layer_completed_whole/1000`: the same read of completed tasks
//!   that the store keeps whole (they still carry resume state): the
//!   difference to `get/layer/1000` is what rebuilding a compacted finished
//!   task costs. `get/layer_working/1000`: the same for running tasks (no
//!   result to copy or serialize).
//! - `lifecycle/immediate`: `tools/call` → task → the runner records the
//!   handler's result → `completed` event → `tasks/get` reads `completed`,
//!   one after the other, handler answering at once. Target: at least 150k/s.
//! - `input_round`: on a task waiting in `input_required`, `tasks/update`
//!   with the answer → the layer resumes the handler → it asks again → the
//!   `input_required` event arrives (`TaskLayer::subscribe`). Target: under
//!   20 µs.
//! - `reap/{live}/{expired}`: `TaskStore::delete_expired` in batches of 1024
//!   (as the layer's reaper does) until N expired tasks are gone, next to
//!   `live` unexpired tasks. Must be O(N), independent of `live`.

//!
//! Built with `RUSTFLAGS="--cfg mcp_bench_jemalloc"`, the benches allocate
//! through jemalloc instead of the system allocator, to show how much of a
//! figure is the allocator's (BENCHMARKS.md).

#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

#[cfg(all(mcp_bench_jemalloc, not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mcp_task_layer::store::TaskStore;
use mcp_task_layer::{MemoryStore, TaskLayer, TaskPolicy, TaskStatus};
use tower::{service_fn, Layer, Service};

mod support;
use support::{
    call, completed_record, get, inner, now_ms, runtime, status_of, task_id_of,
    tasks_waiting_for_input, time_creations, timed, uncapped, update, wait_for, XorShift,
};

const CHUNK: u64 = 256;
const HOUR_MS: u64 = 3_600_000;

/// What the populated tasks are.
#[derive(Clone, Copy)]
enum Kind {
    /// Completed, as the layer leaves them: the store keeps them compact.
    Completed,
    /// Completed, but with resume state the store must keep: kept whole.
    CompletedWhole,
    /// Still running.
    Working,
}

/// A store with `n` live tasks of `kind`, and their ids.
fn populated(n: usize, kind: Kind) -> (MemoryStore, Arc<Vec<String>>) {
    let rt = runtime();
    let store = MemoryStore::new();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ n as u64);
    let now = now_ms();
    let ids: Vec<String> = (0..n).map(|_| rng.task_id()).collect();
    rt.block_on(async {
        for (i, id) in ids.iter().enumerate() {
            // Created over the last moments at 300k tasks/s, oldest first,
            // as a busy server would have made them.
            let created = now - ((n - i) / 300) as i64;
            let mut r = completed_record(id.clone(), created, Some(HOUR_MS));
            match kind {
                Kind::Completed => {}
                // Resume state left in place keeps the record whole.
                Kind::CompletedWhole => {
                    r.arguments = Some(serde_json::json!({ "kept": true }).into())
                }
                Kind::Working => {
                    r.status = TaskStatus::Working;
                    r.outcome = None;
                }
            }
            store.create(r).await.expect("unique ids");
        }
    });
    (store, Arc::new(ids))
}

type Fixture = (MemoryStore, Arc<Vec<String>>);

/// The store with `n` completed tasks, built on first use and kept for the
/// whole run (the 1M one is shared by `get` and `reap`).
fn fixture(n: usize) -> &'static Fixture {
    static SMALL: OnceLock<Fixture> = OnceLock::new();
    static MEDIUM: OnceLock<Fixture> = OnceLock::new();
    static LARGE: OnceLock<Fixture> = OnceLock::new();
    let cell = match n {
        1_000 => &SMALL,
        100_000 => &MEDIUM,
        1_000_000 => &LARGE,
        _ => unreachable!("no fixture of {n} tasks"),
    };
    cell.get_or_init(|| {
        let start = Instant::now();
        let f = populated(n, Kind::Completed);
        eprintln!("(made {n} tasks in {:.2?})", start.elapsed());
        f
    })
}

fn create(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("create");
    g.throughput(Throughput::Elements(1));
    g.bench_function("layer_task_call", |b| {
        b.iter_custom(|iters| {
            let store = MemoryStore::new();
            let mut svc = TaskLayer::new(store.clone())
                .with_tool_policy("work", TaskPolicy::Task)
                .layer(service_fn(inner));
            let req = call(1, "work");
            rt.block_on(time_creations(&mut svc, &store, &req, iters, CHUNK))
        })
    });
    g.bench_function("handler_still_running", |b| {
        b.iter_custom(|iters| {
            let mut svc = uncapped(TaskLayer::new(MemoryStore::new()))
                .with_tool_policy("hang", TaskPolicy::Task)
                .layer(service_fn(inner));
            let req = call(1, "hang");
            // The handlers never finish: their runners stay parked on `rt`.
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
    g.bench_function("store_direct", |b| {
        b.iter_custom(|iters| {
            let store = MemoryStore::new();
            let mut rng = XorShift(7);
            let now = now_ms();
            timed(
                &rt,
                iters,
                CHUNK,
                |_| completed_record(rng.task_id(), now, Some(HOUR_MS)),
                async |r| store.create(r).await.unwrap(),
            )
        })
    });
    g.finish();
}

fn get_flat(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("get");
    g.throughput(Throughput::Elements(1));
    for n in [1_000usize, 100_000, 1_000_000] {
        let mut rng = XorShift(42);
        g.bench_with_input(BenchmarkId::new("layer", n), &n, |b, &n| {
            let (store, ids) = fixture(n);
            let mut svc = TaskLayer::new(store.clone()).layer(service_fn(inner));
            let resp = rt.block_on(svc.call(get(1, &ids[0]))).unwrap();
            assert_eq!(resp.result_value().unwrap()["status"], "completed");
            b.iter_custom(|iters| {
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |i| get(i as i64, &ids[rng.next_u64() as usize % n]),
                    async |r| {
                        std::hint::black_box(svc.call(r).await.unwrap());
                    },
                )
            })
        });
    }
    g.bench_with_input(
        BenchmarkId::new("layer_2threads", 1_000_000),
        &1_000_000,
        |b, &n| {
            let (store, ids) = fixture(n);
            let svc = TaskLayer::new(store.clone()).layer(service_fn(inner));
            b.iter_custom(|iters| two_threads(&svc, ids, n, iters))
        },
    );
    // The same read of completed tasks the store keeps whole rather than
    // compact (what compaction costs a read), and of running tasks.
    for (name, kind) in [
        ("layer_completed_whole", Kind::CompletedWhole),
        ("layer_working", Kind::Working),
    ] {
        g.bench_with_input(BenchmarkId::new(name, 1_000), &1_000, |b, &n| {
            let (store, ids) = populated(n, kind);
            let mut svc = TaskLayer::new(store).layer(service_fn(inner));
            let mut rng = XorShift(43);
            b.iter_custom(|iters| {
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |i| get(i as i64, &ids[rng.next_u64() as usize % n]),
                    async |r| {
                        std::hint::black_box(svc.call(r).await.unwrap());
                    },
                )
            })
        });
    }
    g.finish();
}

/// `iters` gets split over two threads; the wall time of both, measured in
/// lockstep chunks so that building requests stays untimed.
fn two_threads<S>(svc: &S, ids: &Arc<Vec<String>>, n: usize, iters: u64) -> Duration
where
    S: Service<mcp_task_layer::JsonRpcRequest, Response = mcp_task_layer::JsonRpcResponse>
        + Clone
        + Send,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    let per = iters.div_ceil(2);
    let rounds = per.div_ceil(CHUNK);
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let mut svc = svc.clone();
                let barrier = &barrier;
                s.spawn(move || {
                    let rt = runtime();
                    let mut rng = XorShift(1 + t);
                    let mut total = Duration::ZERO;
                    for round in 0..rounds {
                        let count = CHUNK.min(per - round * CHUNK);
                        let reqs: Vec<_> = (0..count)
                            .map(|i| get(i as i64, &ids[rng.next_u64() as usize % n]))
                            .collect();
                        barrier.wait();
                        let start = Instant::now();
                        rt.block_on(async {
                            for r in reqs {
                                std::hint::black_box(svc.call(r).await.unwrap());
                            }
                        });
                        barrier.wait();
                        total += start.elapsed();
                    }
                    total
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap_or_default()
    })
}

fn lifecycle(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("lifecycle");
    g.throughput(Throughput::Elements(1));
    {
        let (name, tool) = ("immediate", "work");
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let layer =
                    TaskLayer::new(MemoryStore::new()).with_tool_policy(tool, TaskPolicy::Task);
                let mut rx = layer.subscribe();
                let mut svc = layer.layer(service_fn(inner));
                let req = call(1, tool);
                timed(
                    &rt,
                    iters,
                    CHUNK,
                    |_| req.clone(),
                    async |r| {
                        let id = task_id_of(&svc.call(r).await.unwrap());
                        wait_for(&mut rx, &id, TaskStatus::Completed).await;
                        let got = svc.call(get(2, &id)).await.unwrap();
                        assert_eq!(status_of(&got), "completed");
                    },
                )
            })
        });
    }
    g.finish();
}

fn input_round(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("input_round");
    g.throughput(Throughput::Elements(1));
    g.bench_function("update_resume_input_required", |b| {
        b.iter_custom(|iters| {
            let store = MemoryStore::new();
            let layer =
                uncapped(TaskLayer::new(store.clone())).with_tool_policy("ask", TaskPolicy::Task);
            let mut svc = layer.layer(service_fn(inner));
            // Untimed: `iters` tasks waiting for the answer to `q`.
            let ids = rt.block_on(tasks_waiting_for_input(&svc, &store, iters));
            let mut rx = layer.subscribe();
            let mut next = ids.iter();
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
                    debug_assert!(ack.result_value().is_some());
                    wait_for(&mut rx, &id, TaskStatus::InputRequired).await;
                },
            )
        })
    });
    g.finish();
}

fn reap(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("reap");
    let empty = MemoryStore::new();
    for live in [0usize, 1_000_000] {
        for expired in [1_000u64, 10_000] {
            g.throughput(Throughput::Elements(expired));
            let mut rng = XorShift(99);
            g.bench_with_input(
                BenchmarkId::new(live.to_string(), expired),
                &expired,
                |b, &expired| {
                    let store = if live == 0 { &empty } else { &fixture(live).0 };
                    b.iter_custom(|iters| {
                        rt.block_on(async {
                            let mut total = Duration::ZERO;
                            for _ in 0..iters {
                                // Untimed: `expired` tasks whose hour ran out
                                // a minute ago.
                                let past = now_ms() - HOUR_MS as i64 - 60_000;
                                for _ in 0..expired {
                                    let r = completed_record(rng.task_id(), past, Some(HOUR_MS));
                                    store.create(r).await.unwrap();
                                }
                                let start = Instant::now();
                                let mut gone = 0;
                                loop {
                                    let ids = store.delete_expired(now_ms(), 1024).await.unwrap();
                                    gone += ids.len();
                                    if ids.len() < 1024 {
                                        break;
                                    }
                                }
                                total += start.elapsed();
                                assert_eq!(gone as u64, expired);
                            }
                            total
                        })
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = create, get_flat, lifecycle, input_round, reap
}
criterion_main!(benches);
