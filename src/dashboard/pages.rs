//! The `GET` routes: the overview, the task list, a task's page, the
//! vendored assets and the JSON stats.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;

use super::html::{esc, page, url_part, PageCtx};
use super::list::{self, ListParams};
use super::reply::{self, Refusal};
use super::{overview, task, Shared};

/// The vendored script: live updates and the Cancel button without a
/// reload.
const SCRIPT: &str = include_str!("assets/dashboard.js");
/// The vendored stylesheet.
const STYLE: &str = include_str!("assets/dashboard.css");

/// `GET /`.
pub(crate) async fn overview(
    State(shared): State<Arc<Shared>>,
    Extension(ctx): Extension<PageCtx>,
) -> Response {
    let now = crate::clock::unix_now_ms();
    match overview::render(&shared, &ctx, now, tokio::time::Instant::now()).await {
        Ok(main) => {
            let body = format!(r#"<div id="live-main">{main}</div>"#);
            let events = ctx.href("/events?view=overview");
            reply::html(StatusCode::OK, page(&ctx, "Overview", Some(&events), &body))
        }
        Err(e) => Refusal::store(&e).into_response(),
    }
}

/// `GET /tasks?status=…&tool=…&owner=…&search=…&created_after=…&created_before=…&limit=…&after=…`.
pub(crate) async fn tasks(
    State(shared): State<Arc<Shared>>,
    Extension(ctx): Extension<PageCtx>,
    Query(params): Query<ListParams>,
) -> Response {
    let query = match params.query() {
        Ok(q) => q,
        Err(refusal) => return refusal.into_response(),
    };
    let now = crate::clock::unix_now_ms();
    let (found, stats) = match tokio::try_join!(
        shared.operator.list(&query),
        shared.stats(tokio::time::Instant::now())
    ) {
        Ok(both) => both,
        Err(e) => return Refusal::store(&e).into_response(),
    };
    let mut body = overview::counts(&ctx, &stats);
    body.push_str(&list::body(
        &ctx,
        &params,
        &found.tasks,
        found.next.as_ref(),
        shared.operator.searches_arguments(),
        now,
    ));
    let events = ctx.href("/events?view=counts");
    reply::html(StatusCode::OK, page(&ctx, "Tasks", Some(&events), &body))
}

/// `GET /tasks/{id}`.
pub(crate) async fn task(
    State(shared): State<Arc<Shared>>,
    Extension(ctx): Extension<PageCtx>,
    Path(id): Path<String>,
) -> Response {
    let record = match task::find(&shared, &id).await {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    let now = crate::clock::unix_now_ms();
    let body = format!(
        r#"<p class="muted">Task <code>{id}</code></p><div id="live-task" data-task-status="{status}">{live}</div>
<h2>Seen on this page</h2><ol id="history" class="history"><li>{status} <span class="muted">when the page loaded</span></li></ol>"#,
        id = esc(&record.id),
        status = record.status.as_str(),
        live = task::render(&ctx, &record, now),
    );
    let events = ctx.href(&format!("/events?view=task&id={}", url_part(&record.id)));
    reply::html(
        StatusCode::OK,
        page(&ctx, &record.tool_name, Some(&events), &body),
    )
}

/// `GET /api/stats`: [`TaskStats`](crate::store::TaskStats) as JSON.
pub(crate) async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    match shared.stats(tokio::time::Instant::now()).await {
        Ok(stats) => match serde_json::to_value(&stats) {
            Ok(v) => reply::json(StatusCode::OK, &v),
            Err(e) => {
                Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
            }
        },
        Err(e) => Refusal::store(&e).into_response(),
    }
}

/// `GET /assets/dashboard.js`.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /assets/dashboard.css`.
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [(CONTENT_TYPE, kind), (CACHE_CONTROL, "max-age=300")],
        body,
    )
        .into_response()
}
