//! A worker process (`FVA_WORKER` = `ours` or `apalis`): runs one worker
//! on the run's table, prefix or queue until its stdin closes.

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::side::Engine;
use crate::{ours, theirs, CONCURRENCY};

/// This process's role, if it is a worker.
pub fn role() -> Option<String> {
    std::env::var("FVA_WORKER").ok().filter(|r| !r.is_empty())
}

/// Tell the bench this worker is connected.
pub fn ready() {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
}

pub fn main(role: &str) {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let engine = Engine::new(&var("FVA_ENGINE"), var("FVA_URL"));
    let name = var("FVA_NAME");
    // `noop`, or `<N>ms`: a job that sleeps N ms (`10ms`, `100ms`, …).
    let sleep_ms = var("FVA_JOB")
        .strip_suffix("ms")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    theirs::SLEEP_MS.store(sleep_ms, Ordering::Relaxed);
    // Stop when the bench closes stdin (or dies).
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        if role == "ours" {
            let store = ours::store(&engine, &name).await;
            let layer = ours::layer(Arc::clone(&store));
            let worker = layer
                .worker(tower::service_fn(move |req| ours::handler(req, sleep_ms)))
                .with_concurrency(CONCURRENCY);
            ready();
            worker
                .run(std::future::pending(), Duration::from_secs(1))
                .await;
        } else {
            theirs::work(&engine, &name).await;
        }
    });
}
