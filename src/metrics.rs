//! Task metrics through the [`metrics`](https://docs.rs/metrics) facade
//! (feature `metrics`); no-ops without it. No exporter is installed: the
//! application picks one.
//!
//! | name | kind | labels | unit |
//! |---|---|---|---|
//! | `mcp_tasks_created_total` | counter | `era` = `modern` \| `legacy` | tasks |
//! | `mcp_tasks_finished_total` | counter | `status` = `completed` \| `failed` \| `cancelled` | tasks |
//! | `mcp_tasks_active` | gauge | `status` = `working` \| `input_required` | tasks held by this process |
//! | `mcp_tasks_expired_total` | counter | | tasks reaped after their TTL |
//! | `mcp_task_resume_seconds` | histogram | | seconds from the answer that completed a round to the resumed handler's next answer being stored |
//! | `mcp_task_cancel_stop_seconds` | histogram | | seconds from the cancellation signal to the handler stopping (returning, or aborted after the grace) |
//! | `mcp_task_lease_lost_total` | counter | | runners that found another replica had taken their task over |

use std::time::Duration;

use crate::protocol::TaskStatus;
use crate::store::Era;

#[cfg(feature = "metrics")]
mod imp {
    use super::*;

    pub(crate) fn created(era: Era) {
        let era = if era == Era::Legacy {
            "legacy"
        } else {
            "modern"
        };
        metrics::counter!("mcp_tasks_created_total", "era" => era).increment(1);
        metrics::gauge!("mcp_tasks_active", "status" => "working").increment(1.0);
    }

    pub(crate) fn transition(prev: TaskStatus, next: TaskStatus) {
        if prev == next {
            return;
        }
        if !prev.is_terminal() {
            metrics::gauge!("mcp_tasks_active", "status" => prev.as_str()).decrement(1.0);
        }
        if next.is_terminal() {
            metrics::counter!("mcp_tasks_finished_total", "status" => next.as_str()).increment(1);
        } else {
            metrics::gauge!("mcp_tasks_active", "status" => next.as_str()).increment(1.0);
        }
    }

    pub(crate) fn expired(active: Option<TaskStatus>) {
        metrics::counter!("mcp_tasks_expired_total").increment(1);
        if let Some(status) = active.filter(|s| !s.is_terminal()) {
            metrics::gauge!("mcp_tasks_active", "status" => status.as_str()).decrement(1.0);
        }
    }

    pub(crate) fn resumed(latency: Duration) {
        metrics::histogram!("mcp_task_resume_seconds").record(latency.as_secs_f64());
    }

    pub(crate) fn cancel_stopped(latency: Duration) {
        metrics::histogram!("mcp_task_cancel_stop_seconds").record(latency.as_secs_f64());
    }

    pub(crate) fn lease_lost() {
        metrics::counter!("mcp_task_lease_lost_total").increment(1);
    }
}

#[cfg(not(feature = "metrics"))]
mod imp {
    use super::*;

    pub(crate) fn created(_: Era) {}
    pub(crate) fn transition(_: TaskStatus, _: TaskStatus) {}
    pub(crate) fn expired(_: Option<TaskStatus>) {}
    pub(crate) fn resumed(_: Duration) {}
    pub(crate) fn cancel_stopped(_: Duration) {}
    pub(crate) fn lease_lost() {}
}

pub(crate) use imp::*;
