//! `GET /events`: a page's live part over SSE. The stream wakes on the
//! layer's events (this process's writes, the operator's cancels), on the
//! store's change feed (other processes' writes, where the store has one)
//! and on a resync timer (the only way to see other processes' writes on a
//! store without a feed, and what moves the chart's minutes on), then
//! renders the page's live part again and sends it if it changed, at most
//! every [`THROTTLE`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::html::{PageCtx, STATUSES};
use super::reply::Refusal;
use super::{overview, task, Shared};
use crate::runtime::TaskEvent;
use crate::store::{self, TaskChange};

/// The shortest time between two updates of one stream.
const THROTTLE: Duration = Duration::from_millis(250);
/// How often a stream re-reads when the store reports changes.
const RESYNC_WITH_FEED: Duration = Duration::from_secs(15);
/// How often it re-reads when the store reports none.
const RESYNC_WITHOUT_FEED: Duration = Duration::from_secs(2);

/// Which page listens.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LiveParams {
    view: String,
    id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum View {
    /// The overview's whole live part.
    Overview,
    /// The counts only (the list page).
    Counts,
    /// One task.
    Task(String),
}

/// `GET /events?view=overview|counts|task&id=…`.
pub(crate) async fn events(
    State(shared): State<Arc<Shared>>,
    Extension(ctx): Extension<PageCtx>,
    Query(params): Query<LiveParams>,
) -> Response {
    let view = match (params.view.as_str(), params.id.as_str()) {
        ("overview", _) => View::Overview,
        ("counts", _) => View::Counts,
        ("task", id) if !id.is_empty() => View::Task(id.to_owned()),
        ("task", _) => return Refusal::bad_request("view=task needs an id").into_response(),
        (other, _) => {
            return Refusal::bad_request(format!(
                "view {other:?} is not one of overview, counts, task"
            ))
            .into_response()
        }
    };
    let Ok(slot) = Arc::clone(&shared.streams).try_acquire_owned() else {
        return Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live pages are open: this page does not update by itself",
        )
        .into_response();
    };
    let changes = shared.changes();
    let period = match (shared.resync, changes.is_some()) {
        (Some(period), _) => period,
        (None, true) => RESYNC_WITH_FEED,
        (None, false) => RESYNC_WITHOUT_FEED,
    };
    let mut resync = tokio::time::interval_at(Instant::now() + period, period);
    resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let live = Live {
        events: Some(shared.operator.subscribe()),
        changes,
        shared,
        ctx,
        view,
        resync,
        last: None,
        first: true,
        last_sent: None,
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(live, |mut live| async move {
        let event = live.next().await?;
        Some((Ok::<_, Infallible>(event), live))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

struct Live {
    shared: Arc<Shared>,
    ctx: PageCtx,
    view: View,
    events: Option<broadcast::Receiver<TaskEvent>>,
    changes: Option<broadcast::Receiver<TaskChange>>,
    resync: Interval,
    last: Option<String>,
    first: bool,
    last_sent: Option<Instant>,
    /// Its place among the streams open at once, given back with it.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// What a wake-up was about.
enum Wake {
    /// Task `id` changed.
    Task(String),
    /// Anything may have changed.
    Any,
}

impl Live {
    /// The next update to send; `None` once the caller's session has ended
    /// (signed out here, or past its end): the stream ends with it, at the
    /// next wake-up, a resync period at most.
    async fn next(&mut self) -> Option<Event> {
        loop {
            // Counts read after this moment show whatever woke us.
            let mut since = Instant::now();
            if !std::mem::take(&mut self.first) {
                let wake = self.wait().await;
                if !self.session_live() {
                    return None;
                }
                since = Instant::now();
                if let (View::Task(id), Wake::Task(changed)) = (&self.view, &wake) {
                    if id != changed {
                        continue;
                    }
                }
            }
            if let Some(sent) = self.last_sent {
                tokio::time::sleep_until(sent + THROTTLE).await;
            }
            let payload = match self.render(since).await {
                Ok(v) => v.to_string(),
                Err(e) => json!({ "error": format!("the task store failed: {e}") }).to_string(),
            };
            if self.last.as_ref() != Some(&payload) {
                self.last_sent = Some(Instant::now());
                self.last = Some(payload.clone());
                return Some(Event::default().event("update").data(payload));
            }
        }
    }

    /// Whether the caller may still see the page: a bearer token's caller
    /// always (each request shows its token), a session's while it lives.
    fn session_live(&self) -> bool {
        self.ctx
            .session
            .as_deref()
            .is_none_or(|value| self.shared.sessions.is_live(value))
    }

    async fn wait(&mut self) -> Wake {
        tokio::select! {
            got = recv(&mut self.events) => match got {
                Some(e) => Wake::Task(e.task_id),
                None => Wake::Any,
            },
            got = recv(&mut self.changes) => match got {
                Some(TaskChange::Updated { id, .. }) => Wake::Task(id),
                _ => Wake::Any,
            },
            _ = self.resync.tick() => Wake::Any,
        }
    }

    async fn render(&self, since: Instant) -> store::Result<Value> {
        let operator = &self.shared.operator;
        let now = crate::clock::unix_now_ms();
        Ok(match &self.view {
            View::Overview => {
                let main = overview::render(&self.shared, &self.ctx, now, since).await?;
                json!({ "fragments": { "live-main": main } })
            }
            View::Counts => {
                let stats = self.shared.stats(since).await?;
                let mut counts = Map::new();
                for s in STATUSES {
                    counts.insert(s.as_str().into(), stats.count(s).into());
                }
                counts.insert("queued".into(), stats.queued.into());
                json!({ "counts": counts })
            }
            View::Task(id) => match operator.get(id).await? {
                Some(r) => json!({
                    "status": r.status.as_str(),
                    "fragments": { "live-task": task::render(&self.ctx, &r, now) },
                }),
                None => json!({
                    "status": "gone",
                    "fragments": { "live-task": "<p class=\"muted\">This task is gone: expired or purged.</p>" },
                }),
            },
        })
    }
}

/// The next message of `rx`: `Some` for one, `None` when some were lost
/// (re-read everything); pending forever once `rx` is closed (it is
/// dropped then, so the other wake-ups go on).
async fn recv<T: Clone>(rx: &mut Option<broadcast::Receiver<T>>) -> Option<T> {
    let Some(r) = rx.as_mut() else {
        return std::future::pending().await;
    };
    match r.recv().await {
        Ok(v) => Some(v),
        Err(RecvError::Lagged(_)) => None,
        Err(RecvError::Closed) => {
            *rx = None;
            None
        }
    }
}
