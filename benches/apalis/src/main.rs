//! Queued tasks against a job queue (issue 33): the same job through this
//! crate's front and N `TaskWorker`s, and through apalis (apalis-postgres,
//! apalis-redis) on the same database, in the same run.
//!
//! ```sh
//! MCP_TASKS_POSTGRES_URL=postgres://... MCP_TASKS_REDIS_URL=redis://... \
//!   cargo run --release --manifest-path benches/apalis/Cargo.toml
//! ```
//!
//! Every worker is a process of its own, as a fleet is deployed: the bench
//! runs itself again with `FVA_WORKER` set (`worker.rs`), one process per
//! worker, each with a two-thread runtime and concurrency 16. The front
//! (the `TaskLayer` callers create tasks through, or apalis's `push`) is
//! this process. For each engine, job (`noop`: answers at once; `10ms`:
//! sleeps 10 ms; any `<N>ms` in `FVA_JOBS` sleeps N ms) and worker count
//! (1, 2, 4):
//!
//! - throughput: `FVA_TASKS` jobs (default 20,000 no-op, 5,000 of 10 ms)
//!   submitted by 32 concurrent callers one at a time while the workers
//!   run, from the first submission to the last completion seen in the
//!   store (counted every 20 ms);
//! - latency: for 3 s at half that rate (each system at half its own
//!   throughput), submission to completion as the store records it
//!   (`created_at_ms` to `updated_at_ms` of our records; apalis's `run_at`
//!   to `done_at` on PostgreSQL; apalis-redis keeps no completion time);
//! - backlog (no-op, 2 workers, or each count in `FVA_DRAIN_WORKERS`):
//!   `FVA_BACKLOG` jobs (default 100,000) queued before the workers
//!   start, and 5,000 likewise, each drained at what rate (with
//!   `FVA_PG_STATS=1` on PostgreSQL, also its claim rounds and statements
//!   a task: `pgstat.rs`).
//!
//! With `FVA_DB_PID` (the postmaster's or redis-server's pid) each run
//! also prints the database's CPU per 1,000 tasks (`cpu.rs`). A run in
//! which no job completes for 10 s (a worker process died or stopped
//! fetching) is reported `failed`.
//!
//! `FVA_ONLY=ours` or `apalis` runs one side; `FVA_ENGINES`, `FVA_JOBS`
//! and `FVA_WORKERS` (comma-separated) narrow the grid; `FVA_BACKLOG=0`
//! skips the backlog.
#![allow(missing_docs, unreachable_pub)]

#[path = "../../support/mod.rs"]
mod support;

mod cpu;
mod ours;
mod pgstat;
mod procs;
mod side;
mod theirs;
mod worker;

use std::sync::Arc;
use std::time::{Duration, Instant};

use side::{Engine, Side, System};

/// Concurrent callers in the throughput run.
const CALLERS: usize = 32;
/// Handlers each worker runs at once.
pub const CONCURRENCY: usize = 16;

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Submit `n` jobs from `callers` concurrent callers, ids from `first`.
async fn submit(side: &Arc<Side>, first: usize, n: usize, callers: usize) {
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let side = Arc::clone(side);
            tokio::spawn(async move {
                for i in (c..n).step_by(callers) {
                    side.submit(first + i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("a caller");
    }
}

/// How long a run may go without a job completing before the bench gives
/// it up (a worker process died).
const STALL: Duration = Duration::from_secs(10);

/// Wait until `n` jobs are complete; the instant the count reached it, or
/// `None` if the count stalled. The count reads every completed row (both
/// systems): it is made every 20 ms, or five times its own time apart when
/// that is longer, so that counting a 100k backlog does not take a core of
/// the database it measures (a count of 50k completed rows took 25–40 ms).
async fn completed(side: &Side, n: u64) -> Option<Instant> {
    let (mut last, mut moved) = (0, Instant::now());
    loop {
        let asked = Instant::now();
        let done = side.completed().await;
        let took = asked.elapsed();
        if done >= n {
            return Some(Instant::now());
        }
        if done != last {
            (last, moved) = (done, Instant::now());
        } else if moved.elapsed() > STALL {
            eprintln!(
                "fleet_vs_apalis: {} stalled at {done} of {n} jobs",
                side.name()
            );
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20).max(took * 5)).await;
    }
}

/// Jobs per second through `side` with `workers` workers running.
async fn throughput(side: &Arc<Side>, tasks: usize) -> Option<f64> {
    let started = Instant::now();
    let sub = {
        let side = Arc::clone(side);
        tokio::spawn(async move { submit(&side, 0, tasks, CALLERS).await })
    };
    let done = completed(side, tasks as u64).await;
    sub.abort();
    Some(tasks as f64 / done?.duration_since(started).as_secs_f64())
}

/// Jobs the latency run submits at `rate`.
fn latency_jobs(rate: f64) -> usize {
    ((rate * 3.0) as usize).max(20)
}

/// Submission to completion (ms, p50 and p99) at `rate` jobs per second
/// for 3 s, after `first` jobs already done.
async fn latency(side: &Arc<Side>, rate: f64, first: usize) -> Option<(i64, i64)> {
    let n = latency_jobs(rate);
    let every = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let mut pace = tokio::time::interval(every);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut subs = Vec::with_capacity(n);
    for i in 0..n {
        pace.tick().await;
        let side = Arc::clone(side);
        subs.push(tokio::spawn(async move { side.submit(first + i).await }));
    }
    for s in subs {
        s.await.expect("submitted");
    }
    completed(side, (first + n) as u64).await?;
    let mut ms = side.latencies(first).await?;
    if ms.is_empty() {
        return None;
    }
    ms.sort_unstable();
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
    Some((at(0.5), at(0.99)))
}

/// One throughput run and one latency run of `system`.
async fn measure(
    engine: &Engine,
    system: System,
    job: &str,
    workers: usize,
    tasks: usize,
) -> (Option<f64>, Option<(i64, i64)>) {
    let cpu = cpu::Cpu::now();
    let side = Arc::new(Side::open(engine, system).await);
    let fleet = procs::Fleet::start(engine, system, side.name(), job, workers);
    let rate = throughput(&side, tasks).await;
    let lat = match rate {
        Some(rate) => latency(&side, rate * 0.5, tasks).await,
        None => None,
    };
    fleet.stop();
    side.close().await;
    if let Some(rate) = rate {
        let jobs = tasks + latency_jobs(rate * 0.5);
        let used = cpu::Cpu::now().since(cpu);
        println!("  {} {}", system.as_str(), used.per_1000(jobs));
    }
    (rate, lat)
}

/// Drain rate of `backlog` no-op jobs queued before `workers` start.
async fn drain(engine: &Engine, system: System, workers: usize, backlog: usize) -> Option<f64> {
    let side = Arc::new(Side::open(engine, system).await);
    side.backlog(backlog).await;
    let stats = pgstat::PgStats::start(engine).await;
    let cpu = cpu::Cpu::now();
    let started = Instant::now();
    let fleet = procs::Fleet::start(engine, system, side.name(), "noop", workers);
    let done = completed(&side, backlog as u64).await;
    fleet.stop();
    // The front's connections (its counts) are still open: the database's
    // share is the workers' connections' (their backends exit, and are
    // counted, shortly after the workers) and the postmaster's.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let used = cpu::Cpu::now().since(cpu);
    println!(
        "  {} {backlog} queued, {}",
        system.as_str(),
        used.per_1000(backlog)
    );
    if let Some(stats) = stats {
        stats.print(system.as_str(), backlog).await;
    }
    side.close().await;
    Some(backlog as f64 / done?.duration_since(started).as_secs_f64())
}

fn fmt_lat(l: Option<(i64, i64)>) -> String {
    l.map_or_else(
        || "n/a".to_owned(),
        |(p50, p99)| format!("p50={p50}ms p99={p99}ms"),
    )
}

fn fmt_rate(r: Option<f64>) -> String {
    r.map_or_else(|| "failed".to_owned(), |r| format!("{r:.0}/s"))
}

fn main() {
    if let Some(role) = worker::role() {
        worker::main(&role);
        return;
    }
    let mut engines = Vec::new();
    for name in env_list("FVA_ENGINES", "postgres,redis") {
        let var = match name.as_str() {
            "postgres" => "MCP_TASKS_POSTGRES_URL",
            "redis" => "MCP_TASKS_REDIS_URL",
            _ => continue,
        };
        match std::env::var(var).ok().filter(|u| !u.is_empty()) {
            Some(url) => engines.push(Engine::new(&name, url)),
            None => eprintln!("fleet_vs_apalis: {name} skipped (set {var})"),
        }
    }
    let only = std::env::var("FVA_ONLY").unwrap_or_default();
    let ours = only != "apalis";
    let apalis = only != "ours";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let workers: Vec<usize> = env_list("FVA_WORKERS", "1,2,4")
        .iter()
        .filter_map(|w| w.parse().ok())
        .collect();
    let backlog = env_usize("FVA_BACKLOG", 100_000);
    let drain_workers: Vec<usize> = env_list("FVA_DRAIN_WORKERS", "2")
        .iter()
        .filter_map(|w| w.parse().ok())
        .collect();
    println!("worker processes: 2 threads, concurrency {CONCURRENCY} each; front: this process, 2 threads");
    for engine in &engines {
        rt.block_on(Side::prepare(engine, apalis));
        for job in env_list("FVA_JOBS", "noop,10ms") {
            let tasks = env_usize("FVA_TASKS", if job == "noop" { 20_000 } else { 5_000 });
            for &n in &workers {
                let (x, lx) = if ours {
                    rt.block_on(measure(engine, System::Ours, &job, n, tasks))
                } else {
                    (None, None)
                };
                let (y, ly) = if apalis {
                    rt.block_on(measure(engine, System::Apalis, &job, n, tasks))
                } else {
                    (None, None)
                };
                let ratio = match (x, y) {
                    (Some(x), Some(y)) => format!("{:.2}", x / y),
                    _ => "n/a".to_owned(),
                };
                println!(
                    "fleet {} {job} workers={n} ours={} apalis={} ratio={ratio}",
                    engine.name,
                    fmt_rate(x),
                    fmt_rate(y)
                );
                println!(
                    "  latency at 50% load: ours {} (at {}), apalis {} (at {})",
                    fmt_lat(lx),
                    fmt_rate(x.map(|x| x * 0.5)),
                    fmt_lat(ly),
                    fmt_rate(y.map(|y| y * 0.5))
                );
            }
        }
        for &n in drain_workers.iter().filter(|_| backlog > 0) {
            let small = 5_000;
            for (system, on, label) in [
                (System::Ours, ours, "ours"),
                (System::Apalis, apalis, "apalis"),
            ] {
                if !on {
                    continue;
                }
                let empty = rt.block_on(drain(engine, system, n, small));
                let full = rt.block_on(drain(engine, system, n, backlog));
                let ratio = match (full, empty) {
                    (Some(f), Some(e)) => format!("{:.2}x", f / e),
                    _ => "n/a".to_owned(),
                };
                println!(
                    "fleet {} backlog workers={n} {label}: {small} queued {}, {backlog} queued {} ({ratio})",
                    engine.name,
                    fmt_rate(empty),
                    fmt_rate(full)
                );
            }
        }
    }
}
