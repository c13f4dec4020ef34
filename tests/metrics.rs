//! The task metrics move as tasks run (feature `metrics`), read through the
//! debugging recorder of `metrics-util`.
#![cfg(feature = "metrics")]

mod common;

use std::collections::HashMap;

use common::{accept, ok, Client};
use mcp_task_layer::TaskStatus;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;

/// Running totals: the debugging recorder hands out what changed since the
/// last snapshot, so sum the snapshots. `name{label=value}` → value;
/// histograms count their samples.
struct Totals<'a>(&'a Snapshotter, HashMap<String, f64>);

impl Totals<'_> {
    fn get(&mut self, name: &str) -> f64 {
        for (k, v) in read(self.0) {
            *self.1.entry(k).or_default() += v;
        }
        self.1.get(name).copied().unwrap_or(0.0)
    }
}

fn read(snapshotter: &Snapshotter) -> HashMap<String, f64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            let v = match value {
                DebugValue::Counter(c) => c as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(h) => h.len() as f64,
            };
            (name, v)
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn counters_gauges_and_histograms_move_as_tasks_run() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");

    let mut t = Totals(&snapshotter, HashMap::new());
    let mut c = Client::new(common::layer());
    let asked = c.start("ask", json!({})).await;
    c.wait_for(&asked, TaskStatus::InputRequired).await;
    assert_eq!(t.get("mcp_tasks_created_total{era=modern}"), 1.0);
    assert_eq!(t.get("mcp_tasks_active{status=input_required}"), 1.0);
    assert_eq!(t.get("mcp_tasks_active{status=working}"), 0.0);

    ok(&c
        .update(&asked, json!({"name": accept("name", "Ada")}))
        .await);
    c.wait_for(&asked, TaskStatus::Completed).await;
    let hung = c.start("hang", json!({})).await;
    ok(&c.cancel(&hung).await);
    c.wait_for(&hung, TaskStatus::Cancelled).await;
    let failed = c.start("boom", json!({})).await;
    c.wait_for(&failed, TaskStatus::Failed).await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while t.get("mcp_task_cancel_stop_seconds") < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cancelled handler never stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(t.get("mcp_tasks_created_total{era=modern}"), 3.0);
    assert_eq!(t.get("mcp_tasks_finished_total{status=completed}"), 1.0);
    assert_eq!(t.get("mcp_tasks_finished_total{status=cancelled}"), 1.0);
    assert_eq!(t.get("mcp_tasks_finished_total{status=failed}"), 1.0);
    assert_eq!(t.get("mcp_tasks_active{status=working}"), 0.0);
    assert_eq!(t.get("mcp_tasks_active{status=input_required}"), 0.0);
    assert_eq!(t.get("mcp_task_resume_seconds"), 1.0, "one resume measured");

    // An input_required task that expires leaves the active gauge.
    let mut c =
        Client::new(common::layer().with_default_ttl(Some(std::time::Duration::from_secs(5))));
    let waiting = c.start("ask", json!({})).await;
    c.wait_for(&waiting, TaskStatus::InputRequired).await;
    assert_eq!(t.get("mcp_tasks_active{status=input_required}"), 1.0);
    while t.get("mcp_tasks_expired_total") < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(t.get("mcp_tasks_active{status=input_required}"), 0.0);
}
