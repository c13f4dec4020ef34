//! Soak test (not part of CI): many concurrent tasks with input rounds and
//! cancels, in process, for a while; then every task must have reached the
//! state its script expects, and once the tasks have expired and been
//! reaped the process's resident memory is compared with its start.
//!
//! ```sh
//! cargo run --release -p mcp-task-layer-benches --example soak        # 10 000 clients, 60 s, twice
//! cargo run --release -p mcp-task-layer-benches --example soak -- --seconds 20 --tasks 10000 --ttl-secs 30 --cycles 2
//! ```
//!
//! `--tasks N` clients run at once, each one task at a time, script after
//! script, until `--seconds` have passed. The scripts take turns:
//!
//! | script | the client | expected end |
//! |---|---|---|
//! | `rounds` | `ask` with 1-3 input rounds, answering each via `tasks/update` | `completed`, with the last answer in the result |
//! | `cancel_input` | `ask`, then `tasks/cancel` while it waits for input | `cancelled` |
//! | `cancel_working` | `hang` (stops only when cancelled), then `tasks/cancel` | `cancelled`; the handler returns on its token or is aborted after the cancel grace |
//! | `cancel_race` | `ask`, cancelled as its handler answers (0-2 ms) | `cancelled`, and still `cancelled` 60 ms later |
//! | `work` | `work` (sleeps, then answers), or `fail` (a JSON-RPC error) | `completed` / `failed` with `-32050` |
//!
//! Waiting uses the layer's events (`TaskLayer::subscribe`), with a
//! `tasks/get` at least every 500 ms for events the bounded channel
//! dropped. Tasks live `--ttl-secs` (default 60, longer than the slowest
//! script on an overloaded machine) and the reaper runs every 250 ms. After
//! the load the soak waits until the store is empty, then reads `VmRSS`
//! from /proc/self/status once a second until it stops falling (at most
//! `--settle-secs`, default 30), and reports it with the peak (`VmHWM`). It
//! does all that `--cycles` times (default 2) on the same layer: a second
//! cycle that does not grow it shows that what expiry freed is reused, not
//! leaked. The exit status is 1 if any task ended wrong, a record outlived
//! its TTL, a cancelled handler kept running, or resident memory did not
//! come back near its start.
//!
//! The soak allocates through jemalloc (`tikv-jemallocator`, a dependency
//! of the bench crate, not of mcp-task-layer; not on MSVC) with its
//! background thread, which hands pages that stay free for a while
//! (`dirty_decay_ms`, 10 s by default) back to the OS. With glibc's malloc the freed task records stay
//! resident: on the development machine RSS stayed at its 162 MiB peak
//! after every record had expired (it was reused by the next cycle, not
//! leaked), and `MALLOC_ARENA_MAX` / `MALLOC_TRIM_THRESHOLD_` did not
//! change that, since glibc only trims the top of a heap and freed records
//! are spread through it. With jemalloc, the documented run went from
//! 3.6 MiB to a 525 MiB peak and back to 34 MiB after expiry, both cycles
//! (README.md, "Hardening"). A server that wants its memory back after a
//! burst of tasks can do the same: the layer has no allocator of its own.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_task_layer::{
    CancellationToken, JsonRpcError, JsonRpcRequest, JsonRpcResponse, Limits, MemoryStore,
    TaskLayer, TaskOwner, TaskPolicy,
};
use serde_json::{json, Value};
use tokio::sync::{broadcast, Notify};
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

const TASKS: &str = "io.modelcontextprotocol/tasks";
const OWNERS: usize = 64;

struct Args {
    seconds: u64,
    tasks: usize,
    ttl_secs: u64,
    cycles: u64,
    settle_secs: u64,
}

fn args() -> Args {
    let mut out = Args {
        seconds: 60,
        tasks: 10_000,
        ttl_secs: 60,
        cycles: 2,
        settle_secs: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        let number = || {
            value.parse::<u64>().unwrap_or_else(|_| {
                eprintln!("{flag} needs a number, not {value:?}");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--seconds" => out.seconds = number(),
            "--tasks" => out.tasks = usize::try_from(number()).unwrap_or(usize::MAX),
            "--ttl-secs" => out.ttl_secs = number(),
            "--cycles" => out.cycles = number().max(1),
            "--settle-secs" => out.settle_secs = number(),
            _ => {
                eprintln!("usage: soak [--seconds N] [--tasks N] [--ttl-secs N] [--cycles N] [--settle-secs N]");
                std::process::exit(2)
            }
        }
    }
    out
}

/// `VmRSS` or `VmHWM` of this process, in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

mod client;
mod server;

use client::{Client, Stats, Svc, Waiters};
use server::{server, Handlers};

/// jemalloc, whose background thread returns pages freed by expired tasks
/// to the OS (see the module docs).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    let rss_start = status_mib("VmRSS:");
    println!(
        "soak: {} concurrent clients for {} s, {} cycle(s), task TTL {} s; VmRSS at start {rss_start:.1} MiB",
        args.tasks, args.seconds, args.cycles, args.ttl_secs
    );

    let store = MemoryStore::new();
    let layer = TaskLayer::new(store.clone())
        .with_default_policy(TaskPolicy::Task)
        .with_default_ttl(Some(Duration::from_secs(args.ttl_secs)))
        .with_reap_interval(Duration::from_millis(250))
        .with_limits(Limits {
            max_tasks_per_owner: args.tasks,
            ..Limits::default()
        });
    let mut events = layer.subscribe();
    let handlers = Arc::new(Handlers::default());
    let for_server = Arc::clone(&handlers);
    let svc: Svc = BoxCloneSyncService::new(ServiceBuilder::new().layer(layer).service(
        tower::service_fn(move |req| server(Arc::clone(&for_server), req)),
    ));

    let waiters = Arc::new(Waiters::default());
    let lagged = Arc::new(AtomicU64::new(0));
    {
        let waiters = Arc::clone(&waiters);
        let lagged = Arc::clone(&lagged);
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(e) => waiters.wake(&e.task_id),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        lagged.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    let mut failed = false;
    let mut after_expiry = Vec::new();
    for cycle in 1..=args.cycles {
        println!("cycle {cycle}:");
        let stats = Arc::new(Stats::default());
        let errors = Arc::new(Mutex::new(Vec::<String>::new()));
        let started = Instant::now();
        let deadline = started + Duration::from_secs(args.seconds);
        let mut clients = Vec::with_capacity(args.tasks);
        for i in 0..args.tasks {
            let mut client = Client {
                svc: svc.clone(),
                handlers: Arc::clone(&handlers),
                gate: (cycle << 48) | ((i as u64) << 24),
                owner: format!("owner-{}", i % OWNERS),
                waiters: Arc::clone(&waiters),
                stats: Arc::clone(&stats),
                next: 0,
            };
            let errors = Arc::clone(&errors);
            clients.push(tokio::spawn(async move {
                let mut rng = (0x9E37_79B9_7F4A_7C15_u64
                    ^ (i as u64 + cycle).wrapping_mul(0x2545_F491_4F6C_DD1D))
                    | 1;
                let mut script = i as u64;
                while Instant::now() < deadline {
                    if let Err(e) = client.round(script, &mut rng).await {
                        client.stats.wrong.fetch_add(1, Ordering::Relaxed);
                        let mut errors = errors.lock().unwrap();
                        if errors.len() < 10 {
                            errors.push(e);
                        }
                    }
                    script += 1;
                }
            }));
        }

        // Progress, and the peak number of records.
        let mut peak_records = 0;
        let mut last = Instant::now();
        while clients.iter().any(|c| !c.is_finished()) {
            tokio::time::sleep(Duration::from_millis(250)).await;
            peak_records = peak_records.max(store.len());
            if last.elapsed() >= Duration::from_secs(10) {
                last = Instant::now();
                println!(
                    "  t={:>3} s  records {:>7}  requests {:>9}  VmRSS {:.1} MiB",
                    started.elapsed().as_secs(),
                    store.len(),
                    stats.requests.load(Ordering::Relaxed),
                    status_mib("VmRSS:")
                );
            }
        }
        for c in clients {
            c.await.expect("a client panicked");
        }
        let load_secs = started.elapsed().as_secs_f64();
        let rss_end_of_load = status_mib("VmRSS:");

        // Every cancelled `hang` handler has stopped or been aborted.
        let h = &*handlers;
        let ended =
            || h.hang_stopped.load(Ordering::Relaxed) + h.hang_aborted.load(Ordering::Relaxed);
        let stop_deadline = Instant::now() + Duration::from_secs(30);
        while ended() < h.hang_started.load(Ordering::Relaxed) && Instant::now() < stop_deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Wait for expiry and the reaper.
        let expiry_deadline = Instant::now() + Duration::from_secs(args.ttl_secs + 30);
        while !store.is_empty() && Instant::now() < expiry_deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let left = store.len();
        // Freed memory goes back to the OS over the allocator's decay time:
        // read RSS once a second, for at least 12 s (jemalloc's 10 s decay),
        // until it has not fallen by 1 MiB in 5 s.
        let rss_at_expiry = status_mib("VmRSS:");
        let settle_started = Instant::now();
        let mut readings = vec![rss_at_expiry];
        while settle_started.elapsed() < Duration::from_secs(args.settle_secs) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            readings.push(status_mib("VmRSS:"));
            if let [.., before, _, _, _, _, now] = readings.as_slice() {
                if before - now < 1.0 && settle_started.elapsed() >= Duration::from_secs(12) {
                    break;
                }
            }
        }
        let rss_after = readings.last().copied().unwrap_or(f64::NAN);
        let settle_secs = settle_started.elapsed().as_secs();
        after_expiry.push(rss_after);

        let s = &*stats;
        let total = s.rounds.load(Ordering::Relaxed)
            + s.cancel_input.load(Ordering::Relaxed)
            + s.cancel_working.load(Ordering::Relaxed)
            + s.cancel_race.load(Ordering::Relaxed)
            + s.work.load(Ordering::Relaxed)
            + s.fail.load(Ordering::Relaxed);
        let wrong = s.wrong.load(Ordering::Relaxed);
        let requests = s.requests.load(Ordering::Relaxed);
        println!(
            "  load {load_secs:.1} s: {total} tasks ended as expected ({:.0}/s), {wrong} wrong; slowest script {} ms",
            total as f64 / load_secs,
            s.slowest_ms.load(Ordering::Relaxed)
        );
        println!(
            "  rounds {}  cancel_input {}  cancel_working {}  cancel_race {}  work {}  fail {}",
            s.rounds.load(Ordering::Relaxed),
            s.cancel_input.load(Ordering::Relaxed),
            s.cancel_working.load(Ordering::Relaxed),
            s.cancel_race.load(Ordering::Relaxed),
            s.work.load(Ordering::Relaxed),
            s.fail.load(Ordering::Relaxed),
        );
        println!(
            "  {requests} requests ({:.0}/s), {} tasks/update, peak records {peak_records}, layer events the waiter missed {}",
            requests as f64 / load_secs,
            s.updates.load(Ordering::Relaxed),
            lagged.load(Ordering::Relaxed),
        );
        let started_hangs = h.hang_started.load(Ordering::Relaxed);
        println!(
            "  hang handlers so far: {started_hangs} started, {} returned on their token, {} aborted after the cancel grace",
            h.hang_stopped.load(Ordering::Relaxed),
            h.hang_aborted.load(Ordering::Relaxed),
        );
        println!(
            "  records left after expiry: {left}; VmRSS end of load {rss_end_of_load:.1} MiB, \
             when the store was empty {rss_at_expiry:.1} MiB, {settle_secs} s later {rss_after:.1} MiB"
        );
        for e in errors.lock().unwrap().iter() {
            println!("  wrong: {e}");
        }
        failed |= wrong > 0 || left > 0 || ended() != started_hangs || total == 0;
    }

    let rss_peak = status_mib("VmHWM:");
    let rss_after = after_expiry.last().copied().unwrap_or(f64::NAN);
    let growth = rss_peak - rss_start;
    let kept = rss_after - rss_start;
    println!(
        "memory: VmRSS start {rss_start:.1} MiB, peak (VmHWM) {rss_peak:.1} MiB, after expiry {}",
        after_expiry
            .iter()
            .enumerate()
            .map(|(i, m)| format!("{m:.1} MiB (cycle {})", i + 1))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let near = kept <= (0.25 * growth).max(32.0);
    println!(
        "  after expiry {kept:+.1} MiB over the start ({:.0}% of the peak growth): {}",
        if growth > 0.0 {
            100.0 * kept / growth
        } else {
            0.0
        },
        if near {
            "returned near the start"
        } else {
            "did NOT return near the start"
        }
    );
    if let [first, .., last] = after_expiry.as_slice() {
        let drift = last - first;
        println!(
            "  from the first cycle's expiry to the last: {drift:+.1} MiB ({})",
            if drift <= (0.10 * growth).max(16.0) {
                "the memory freed by expiry is reused, not leaked"
            } else {
                "GROWING across cycles: a leak?"
            }
        );
    }
    if failed || !near {
        std::process::exit(1);
    }
}
