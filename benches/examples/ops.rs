//! A fixed number of one operation of `benches/tasks.rs`, for instruction
//! counts (valgrind callgrind) that do not depend on criterion's choice of
//! iterations. The operations run inside `measure` (set-up before it), so
//! `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='*measure*'` counts them alone; divide by N.
//!
//! ```sh
//! cargo build --release -p mcp-task-layer-benches --example ops
//! target/release/examples/ops get 20000        # tasks/get among 1000 completed tasks
//! target/release/examples/ops create 20000     # a Task tool's call, until its task is written
//! target/release/examples/ops lifecycle 20000  # call → task → completed event → tasks/get
//! target/release/examples/ops input 5000       # tasks/update → resume → input_required event
//! ```
//!
//! Requests are built as the criterion benches build them, inside the
//! counted loop here (the criterion benches build most outside their timed
//! loop), so a figure includes building and dropping the requests.

#[path = "../support/mod.rs"]
mod support;

use std::future::Future;

use mcp_task_layer::store::TaskStore;
use mcp_task_layer::{MemoryStore, TaskLayer, TaskPolicy, TaskStatus};
use tower::{service_fn, Layer, Service, ServiceExt};

use support::{
    call, completed_record, get, inner, now_ms, runtime, status_of, task_id_of,
    tasks_waiting_for_input, uncapped, update, wait_for, XorShift,
};

/// The counted part: everything `ops` runs in here, runners included (a
/// current-thread runtime runs its spawned tasks inside `block_on`).
#[inline(never)]
fn measure<F: Future>(rt: &tokio::runtime::Runtime, ops: F) -> F::Output {
    rt.block_on(ops)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = args.get(1).map_or("get", String::as_str);
    let n: u64 = args.get(2).map_or(10_000, |v| v.parse().expect("a count"));
    let rt = runtime();
    {
        match op {
            "get" => {
                let store = MemoryStore::new();
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
                let ids: Vec<String> = (0..1000).map(|_| rng.task_id()).collect();
                rt.block_on(async {
                    for id in &ids {
                        let r = completed_record(id.clone(), now_ms(), Some(3_600_000));
                        store.create(r).await.expect("unique ids");
                    }
                });
                let mut svc = TaskLayer::new(store).layer(service_fn(inner));
                measure(&rt, async {
                    for i in 0..n {
                        let id = &ids[(rng.next_u64() % 1000) as usize];
                        let got = svc.call(get(i as i64, id)).await.unwrap();
                        debug_assert_eq!(status_of(&got), "completed");
                    }
                });
            }
            "create" => {
                let store = MemoryStore::new();
                let mut svc = uncapped(TaskLayer::new(store.clone()))
                    .with_tool_policy("work", TaskPolicy::Task)
                    .layer(service_fn(inner));
                let req = call(1, "work");
                let mut done = 0;
                measure(&rt, async {
                    while done < n {
                        let chunk = 256.min(n - done);
                        let mut last = String::new();
                        for _ in 0..chunk {
                            let resp = svc.ready().await.unwrap().call(req.clone()).await;
                            last = task_id_of(&resp.unwrap());
                        }
                        while store.get(&last, now_ms()).await.unwrap().unwrap().status
                            != TaskStatus::Completed
                        {
                            tokio::task::yield_now().await;
                        }
                        done += chunk;
                    }
                });
            }
            "lifecycle" => {
                let layer =
                    TaskLayer::new(MemoryStore::new()).with_tool_policy("work", TaskPolicy::Task);
                let mut rx = layer.subscribe();
                let mut svc = layer.layer(service_fn(inner));
                let req = call(1, "work");
                measure(&rt, async {
                    for _ in 0..n {
                        let id = task_id_of(&svc.call(req.clone()).await.unwrap());
                        wait_for(&mut rx, &id, TaskStatus::Completed).await;
                        let got = svc.call(get(2, &id)).await.unwrap();
                        assert_eq!(status_of(&got), "completed");
                    }
                });
            }
            "input" => {
                let store = MemoryStore::new();
                let layer = uncapped(TaskLayer::new(store.clone()))
                    .with_tool_policy("ask", TaskPolicy::Task);
                let mut svc = layer.layer(service_fn(inner));
                let ids = rt.block_on(tasks_waiting_for_input(&svc, &store, n));
                let mut rx = layer.subscribe();
                measure(&rt, async {
                    for (i, id) in ids.iter().enumerate() {
                        let ack = svc.call(update(i as i64, id, "q")).await.unwrap();
                        debug_assert!(ack.result_value().is_some());
                        wait_for(&mut rx, id, TaskStatus::InputRequired).await;
                    }
                });
            }
            other => panic!("unknown operation {other}: get, create, lifecycle or input"),
        }
    }
}
