//! Resident memory of 1M completed tasks with ~100-byte results
//! (target: at most 1 GiB).
//!
//! A bench binary, not a criterion bench: it measures the whole process.
//! It makes the tasks through the layer, as a server would: 1M `tools/call`s
//! of a `TaskPolicy::Task` tool whose handler answers at once with a
//! ~100-byte result, on one current-thread runtime, then waits until every
//! runner has written its task and reads `VmRSS` from /proc/self/status.
//! Then, in a fresh process, it does the same with records put straight
//! into a `MemoryStore`.
//!
//! `cargo bench -p mcp-task-layer-benches --bench memory` runs it with 1M
//! tasks; with `-- --quick`, 200k (read the bytes per task); under
//! `cargo test -p mcp-task-layer-benches --benches` (no `--bench` argument)
//! 10k, as a smoke test. `TASKS=N` overrides the count.

use std::time::Instant;

use mcp_task_layer::store::TaskStore;
use mcp_task_layer::{MemoryStore, TaskLayer, TaskPolicy, TaskStatus};
use tower::{service_fn, Layer, Service};

mod support;
use support::{call, completed_record, inner, now_ms, rss_kib, runtime, task_id_of, XorShift};

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let default = match (bench, quick) {
        (true, false) => 1_000_000,
        (true, true) => 200_000,
        (false, _) => 10_000,
    };
    let n: usize = std::env::var("TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    match std::env::var("MEMORY_MODE").as_deref() {
        Ok("layer") => through_layer(n),
        Ok("store") => into_store(n),
        _ => {
            // Each measurement in a process of its own, so that neither
            // reuses the other's freed memory.
            for mode in ["layer", "store"] {
                let status = std::process::Command::new(std::env::current_exe().unwrap())
                    .env("MEMORY_MODE", mode)
                    .env("TASKS", n.to_string())
                    .status()
                    .expect("run the memory bench");
                assert!(status.success(), "memory bench ({mode}) failed");
            }
        }
    }
}

fn through_layer(n: usize) {
    let rt = runtime();
    let base = rss_kib().unwrap_or(0);
    let start = Instant::now();
    let store = MemoryStore::new();
    let layer = TaskLayer::new(store.clone()).with_tool_policy("work", TaskPolicy::Task);
    let mut svc = layer.layer(service_fn(inner));
    let req = call(1, "work");
    rt.block_on(async {
        for i in 0..n {
            let last = task_id_of(&svc.call(req.clone()).await.unwrap());
            if i % 4096 == 4095 || i + 1 == n {
                // Let the runners (queued in order) write their tasks.
                while store.get(&last, now_ms()).await.unwrap().unwrap().status
                    != TaskStatus::Completed
                {
                    tokio::task::yield_now().await;
                }
            }
        }
    });
    let elapsed = start.elapsed();
    let after = rss_kib().unwrap_or(0);
    assert_eq!(store.len(), n);
    println!(
        "memory/layer: {n} completed tasks made through TaskLayer in {elapsed:.2?}: \
         VmRSS {:.1} MiB (process before: {:.1} MiB; {:.0} bytes/task, {:.0} MiB per 1M tasks)",
        mib(after),
        mib(base),
        after.saturating_sub(base) as f64 * 1024.0 / n as f64,
        per_million(base, after, n)
    );
}

/// The growth from `base` to `after` KiB for `n` tasks, scaled to 1M tasks,
/// in MiB.
fn per_million(base: u64, after: u64, n: usize) -> f64 {
    mib(after.saturating_sub(base)) * 1_000_000.0 / n as f64
}

fn into_store(n: usize) {
    let rt = runtime();
    let base = rss_kib().unwrap_or(0);
    let store = MemoryStore::new();
    let mut rng = XorShift(3);
    let now = now_ms();
    rt.block_on(async {
        for _ in 0..n {
            store
                .create(completed_record(rng.task_id(), now, Some(3_600_000)))
                .await
                .unwrap();
        }
    });
    let after = rss_kib().unwrap_or(0);
    assert_eq!(store.len(), n);
    println!(
        "memory/store: {n} completed records put into MemoryStore: VmRSS {:.1} MiB \
         (process before: {:.1} MiB; {:.0} bytes/task, {:.0} MiB per 1M tasks)",
        mib(after),
        mib(base),
        after.saturating_sub(base) as f64 * 1024.0 / n as f64,
        per_million(base, after, n)
    );
}
