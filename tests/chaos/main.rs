//! The chaos harness (issue 31): a fleet of the example server (one front,
//! three workers, `--recovery rerun`) over a PostgreSQL or Redis of the
//! harness's own, driven with a few hundred tasks of mixed kinds while a
//! seeded schedule injects faults (`fleet.rs`); every request and answer
//! is recorded and the history checked afterwards (`check.rs`).
//!
//! ```text
//! cargo test --release --features axum,http-client,postgres,redis --test chaos -- --nocapture
//! CHAOS_SEED=7 CHAOS_SECS=1800 cargo test --release --features axum,http-client,postgres,redis --test chaos -- --nocapture
//! ```
//!
//! `CHAOS_SEED` (default 31) fixes the workload and the fault schedule
//! (not the timing of the processes); `CHAOS_SECS` (default 25) is how
//! long faults are injected; `CHAOS_TASKS` (default 300 for the short run)
//! how many tasks, spread over that time. `CHAOS_ENGINE=postgres|redis`
//! runs one engine only. It prints `chaos: runs R, faults F, tasks T, lost
//! 0, duplicated 0, stale 0` and fails on any violation.

mod check;
#[path = "../common/mod.rs"]
mod common;
mod driver;
mod engines;
mod fleet;
mod proxy;
mod rng;

use std::sync::Arc;
use std::time::{Duration, Instant};

use driver::{Client, Kind, Plan};
use engines::{Database, Postgres, Redis};
use fleet::Fleet;
use rng::Rng;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The workload: `n` tasks of mixed kinds, from `rng`.
fn plans(rng: &mut Rng, n: usize) -> Vec<Plan> {
    (0..n)
        .map(|i| {
            let kind = match rng.below(10) {
                0..=3 => Kind::Quick,
                4 | 5 => Kind::Long,
                6 => Kind::Ask,
                7 => Kind::Multi,
                _ => Kind::Cancel,
            };
            let amount = match kind {
                Kind::Quick => rng.range(2, 10) as f64 / 10.0,
                Kind::Long => rng.range(3, 8) as f64,
                Kind::Cancel => rng.range(200, 3000) as f64,
                _ => 0.0,
            };
            Plan {
                kind,
                amount,
                label: format!("t{i}"),
            }
        })
        .collect()
}

async fn chaos(db: Box<dyn Database>) {
    let seed = env_u64("CHAOS_SEED", 31);
    let secs = env_u64("CHAOS_SECS", 25);
    let tasks = env_u64("CHAOS_TASKS", 300.max(secs * 12)) as usize;
    let name = db.name();
    let began = Instant::now();
    let mut rng = Rng::new(seed);
    let plans = plans(&mut rng, tasks);
    let mut fleet = Fleet::start(db, 3).await;
    let faults_until = Instant::now() + Duration::from_secs(secs);
    // Every task ends within a minute once the faults stop.
    let deadline = faults_until + Duration::from_secs(60);
    let history = driver::History::default();
    let client = Client::new(fleet.front_url(), Arc::clone(&history));
    let mut drivers = tokio::task::JoinSet::new();
    let spread = Duration::from_secs(secs).as_millis() as u64 / tasks.max(1) as u64;
    let starts: Vec<u64> = (0..tasks)
        .map(|i| i as u64 * spread + rng.below(spread.max(1)))
        .collect();
    for (n, plan) in plans.iter().enumerate() {
        let (client, plan, at) = (client.clone(), plan.clone(), starts[n]);
        drivers.spawn(async move {
            tokio::time::sleep(Duration::from_millis(at)).await;
            driver::drive(client, n, plan, deadline).await;
        });
    }
    fleet.rampage(&mut rng, faults_until).await;
    while drivers.join_next().await.is_some() {}
    // A handler stops within a heartbeat of its cancel (a third of the
    // lease; at once with the change feed): the last cancels' stops
    // reach the run logs by then.
    tokio::time::sleep(Duration::from_secs(fleet::LEASE_SECS)).await;
    let history = history.lock().unwrap().clone();
    let v = check::check(&plans, &history, &fleet.logs(), &fleet.faults);
    for fault in &fleet.faults {
        eprintln!("fault: {}", fault.what);
    }
    for note in &v.notes {
        eprintln!("note: {note}");
    }
    println!(
        "chaos ({name}, seed {seed}, {secs} s of faults, {:.0} s in all): completed {}, failed {}, cancelled {} ({} stops timed), unacked {}, answered at once {}",
        began.elapsed().as_secs_f64(),
        v.completed,
        v.failed,
        v.cancelled,
        v.stops_timed,
        v.unacked,
        v.sync
    );
    println!(
        "chaos: runs {}, faults {}, tasks {}, lost {}, duplicated {}, stale {}, unstopped {}",
        v.runs,
        fleet.faults.len(),
        v.tasks,
        v.lost,
        v.duplicated,
        v.stale,
        v.unstopped
    );
    assert!(v.ok(), "the history shows violations (notes above)");
}

/// The run on `engine`, unless `CHAOS_ENGINE` names another or `make`
/// finds no server to start (outside CI).
async fn on(engine: &str, make: fn() -> Option<Box<dyn Database>>) {
    if std::env::var("CHAOS_ENGINE").is_ok_and(|e| e != engine) {
        return;
    }
    if let Some(db) = make() {
        chaos(db).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_postgres() {
    on("postgres", || Some(Box::new(Postgres::create()?))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_redis() {
    on("redis", || Some(Box::new(Redis::create()?))).await;
}
