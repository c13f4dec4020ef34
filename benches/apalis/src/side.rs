//! One system (ours or apalis) on one engine, as the bench drives it.

use crate::{ours, theirs};

/// A database the bench runs on.
pub struct Engine {
    /// `postgres` or `redis`.
    pub name: String,
    pub url: String,
}

impl Engine {
    pub fn new(name: &str, url: String) -> Self {
        Engine {
            name: name.to_owned(),
            url,
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.name == "postgres"
    }
}

/// Which queue.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum System {
    Ours,
    Apalis,
}

impl System {
    pub fn as_str(self) -> &'static str {
        match self {
            System::Ours => "ours",
            System::Apalis => "apalis",
        }
    }
}

/// The front of one run: a fresh table, prefix or queue of its own.
pub enum Side {
    Ours(ours::Front),
    Apalis(theirs::Front),
}

/// A name no other run uses.
fn fresh_name(system: System) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    format!("fva_{}_{}_{run}", system.as_str(), std::process::id())
}

impl Side {
    /// What a system needs once per engine (apalis's schema).
    pub async fn prepare(engine: &Engine, apalis: bool) {
        if apalis {
            theirs::prepare(engine).await;
        }
    }

    pub async fn open(engine: &Engine, system: System) -> Self {
        let name = fresh_name(system);
        match system {
            System::Ours => Side::Ours(ours::Front::open(engine, name).await),
            System::Apalis => Side::Apalis(theirs::Front::open(engine, name).await),
        }
    }

    /// The table, prefix or queue the workers are to use.
    pub fn name(&self) -> &str {
        match self {
            Side::Ours(f) => &f.name,
            Side::Apalis(f) => &f.name,
        }
    }

    /// Submit job number `i`.
    pub async fn submit(&self, i: usize) {
        match self {
            Side::Ours(f) => f.submit(i).await,
            Side::Apalis(f) => f.submit(i).await,
        }
    }

    /// Queue `n` jobs as fast as the system takes them.
    pub async fn backlog(self: &std::sync::Arc<Self>, n: usize) {
        match &**self {
            Side::Ours(_) => crate::submit(self, 0, n, 64).await,
            Side::Apalis(f) => f.push_all(n).await,
        }
    }

    /// Jobs completed so far.
    pub async fn completed(&self) -> u64 {
        match self {
            Side::Ours(f) => f.completed().await,
            Side::Apalis(f) => f.completed().await,
        }
    }

    /// Submission to completion (ms) of jobs `first..`, where the store
    /// records both.
    pub async fn latencies(&self, first: usize) -> Option<Vec<i64>> {
        match self {
            Side::Ours(f) => Some(f.latencies(first).await),
            Side::Apalis(f) => f.latencies(first).await,
        }
    }

    /// Delete what the run wrote.
    pub async fn close(&self) {
        match self {
            Side::Ours(f) => f.close().await,
            Side::Apalis(f) => f.close().await,
        }
    }
}

/// Delete every Redis key under `prefix:`.
pub async fn redis_delete_prefix(url: &str, prefix: &str) {
    let client = redis::Client::open(url).expect("a redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .expect("scan");
        if !keys.is_empty() {
            let _: () = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .expect("unlink");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}
