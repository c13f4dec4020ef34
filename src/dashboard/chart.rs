//! Throughput and failures over the last hour, as an inline SVG bar chart.
//!
//! Read from the store's index of ended tasks by the time they ended
//! ([`Operator::ended`]): every task that ended in the hour, however long
//! ago it was created, each in its minute; not one purged or expired. A
//! store without that index is read from one bounded page of the operator
//! API instead: the newest [`MAX_PAGE`] tasks that ended among those
//! created in the last hour (a lower bound, which the chart then says).

use std::fmt::Write as _;

use crate::protocol::TaskStatus;
use crate::runtime::Operator;
use crate::store::{self, EndedQuery, TaskQuery, MAX_PAGE};

/// Minutes in the chart.
const MINUTES: usize = 60;
const MINUTE_MS: i64 = 60_000;

/// Ended tasks per minute, oldest minute first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Throughput {
    /// `[completed, failed, cancelled]` per minute.
    pub(crate) minutes: Vec<[u64; 3]>,
    /// Whether the page was full (more tasks may have ended).
    pub(crate) truncated: bool,
    /// Whether only the tasks created in the hour were counted (a store
    /// without an index of ended tasks).
    pub(crate) by_creation: bool,
}

impl Throughput {
    /// Read the last hour before `now_ms`.
    pub(crate) async fn read(operator: &Operator, now_ms: i64) -> store::Result<Self> {
        let hour = EndedQuery::last(MINUTES as i64 * MINUTE_MS, MINUTE_MS, now_ms);
        match operator.ended(hour).await {
            Ok(counts) => {
                return Ok(Throughput {
                    minutes: counts.spans,
                    truncated: false,
                    by_creation: false,
                })
            }
            Err(store::Error::Unsupported(_)) => {}
            Err(e) => return Err(e),
        }
        let query = TaskQuery::new()
            .status(TaskStatus::Completed)
            .status(TaskStatus::Failed)
            .status(TaskStatus::Cancelled)
            .created_after_ms(now_ms - MINUTES as i64 * MINUTE_MS)
            .limit(MAX_PAGE);
        let page = operator.list(&query).await?;
        let mut minutes = vec![[0u64; 3]; MINUTES];
        for task in &page.tasks {
            let ago = (now_ms - task.updated_at_ms).max(0) / MINUTE_MS;
            let Ok(ago) = usize::try_from(ago) else {
                continue;
            };
            if ago >= MINUTES {
                continue;
            }
            let column = match task.status {
                TaskStatus::Completed => 0,
                TaskStatus::Failed => 1,
                _ => 2,
            };
            minutes[MINUTES - 1 - ago][column] += 1;
        }
        Ok(Throughput {
            minutes,
            truncated: page.next.is_some(),
            by_creation: true,
        })
    }

    /// The totals: `[completed, failed, cancelled]`.
    pub(crate) fn totals(&self) -> [u64; 3] {
        self.minutes.iter().fold([0; 3], |acc, m| {
            [acc[0] + m[0], acc[1] + m[1], acc[2] + m[2]]
        })
    }

    /// The chart: one stacked bar per minute (completed, failed,
    /// cancelled), a caption with the totals.
    pub(crate) fn svg(&self) -> String {
        const W: u64 = 600;
        const H: u64 = 120;
        let bar = W / MINUTES as u64;
        let peak = self
            .minutes
            .iter()
            .map(|m| m.iter().sum::<u64>())
            .max()
            .unwrap_or(0);
        let top = peak.max(1);
        let [done, failed, cancelled] = self.totals();
        let at_least = if self.truncated { "at least " } else { "" };
        let scope = if self.by_creation {
            "tasks created in the last hour; "
        } else {
            ""
        };
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<figure class="chart"><svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="tasks ended per minute over the last hour"><title>Tasks ended per minute, last hour</title>"#
        );
        let _ = write!(
            out,
            r##"<line x1="0" y1="{H}" x2="{W}" y2="{H}" stroke="#999"/>"##
        );
        for (i, minute) in self.minutes.iter().enumerate() {
            let x = i as u64 * bar;
            let mut y = H;
            for (n, class) in minute
                .iter()
                .zip(["c-completed", "c-failed", "c-cancelled"])
            {
                if *n == 0 {
                    continue;
                }
                let h = (n * (H - 10) / top).max(1);
                y -= h;
                let _ = write!(
                    out,
                    r#"<rect class="{class}" x="{x}" y="{y}" width="{w}" height="{h}"><title>{n}</title></rect>"#,
                    w = bar.saturating_sub(1).max(1),
                );
            }
        }
        let _ = write!(
            out,
            r#"</svg><figcaption>Last hour, per minute: {at_least}<span class="k-completed">{done} completed</span>, <span class="k-failed">{failed} failed</span>, <span class="k-cancelled">{cancelled} cancelled</span> ({scope}peak {peak}/min)</figcaption></figure>"#
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_totals() {
        let mut minutes = vec![[0; 3]; MINUTES];
        minutes[59] = [3, 1, 0];
        minutes[0] = [0, 0, 2];
        let t = Throughput {
            minutes,
            truncated: true,
            by_creation: true,
        };
        assert_eq!(t.totals(), [3, 1, 2]);
        let svg = t.svg();
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(r#"at least <span class="k-completed">3 completed</span>"#));
        assert!(svg.contains("tasks created in the last hour"));
    }
}
