//! One task's page at `/tasks/{id}`: status, times and status history,
//! status message,
//! outstanding input requests, arguments, result or error, owner, worker,
//! and the Cancel button (a `POST` with the session's CSRF token).

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::header::{ACCEPT, LOCATION};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{json, Value};

use super::auth::{may_act, CsrfForm};
use super::html::{badge, esc, time_ago, url_part, utc, PageCtx};
use super::list::worker;
use super::reply::{self, Refusal};
use super::Shared;
use crate::runtime::CancelOutcome;
use crate::store::{self, Era, TaskOutcome, TaskRecord};

/// The most characters of one JSON value a page shows.
const MAX_SHOWN: usize = 64 * 1024;

/// `value` as indented JSON, escaped, cut at [`MAX_SHOWN`] characters.
fn pretty(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let cut: String = text.chars().take(MAX_SHOWN).collect();
    let more = if cut.len() < text.len() {
        r#"<span class="muted">… (cut)</span>"#
    } else {
        ""
    };
    format!("<pre class=\"json\">{}{more}</pre>", esc(&cut))
}

/// The page's live part: everything the script replaces when the task
/// changes.
pub(crate) fn render(ctx: &PageCtx, r: &TaskRecord, now: i64) -> String {
    let sealed = |field: &str| r.sealed.contains_key(field);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<p class="status-line">Status <span id="task-status">{status}</span>{cancel_asked}</p>
<table class="facts"><tbody>
<tr><th>Tool</th><td><code>{tool}</code></td></tr>
<tr><th>Owner</th><td>{owner}</td></tr>
<tr><th>Worker</th><td><code>{worker}</code></td></tr>
<tr><th>Protocol</th><td>{era}</td></tr>
<tr><th>Created</th><td>{created} <span class="muted">{created_at}</span></td></tr>
<tr><th>Last change</th><td>{updated} <span class="muted">{updated_at}</span> (version {version}, round {round})</td></tr>
<tr><th>Expires</th><td>{expires}</td></tr>
</tbody></table>"#,
        status = badge(r.status),
        cancel_asked = if r.cancel_requested {
            r#" <span class="muted">(its client asked to cancel)</span>"#
        } else {
            ""
        },
        tool = esc(&r.tool_name),
        owner = esc(r.owner.as_deref().unwrap_or("- (no owner)")),
        worker = esc(&worker(r)),
        era = if r.era == Era::Legacy {
            "2025-11-25"
        } else {
            "2026-07-28"
        },
        created = time_ago(r.created_at_ms, now),
        created_at = utc(r.created_at_ms),
        updated = time_ago(r.updated_at_ms, now),
        updated_at = utc(r.updated_at_ms),
        version = r.version,
        round = r.round,
        expires = r
            .expires_at_ms()
            .map_or_else(|| "never".to_owned(), |at| time_ago(at, now)),
    );
    out.push_str(r#"<h2>History</h2><ol class="history">"#);
    let _ = write!(
        out,
        "<li>{} created <span class=\"muted\">{}</span></li>",
        badge(crate::protocol::TaskStatus::Working),
        utc(r.created_at_ms)
    );
    // Absolute times only: the live part is sent again whenever its text
    // changes, and a relative time would change it every second.
    for change in &r.history {
        let _ = write!(
            out,
            "<li>{} <span class=\"muted\">{}</span></li>",
            badge(change.status),
            utc(change.at_ms)
        );
    }
    out.push_str("</ol>");
    out.push_str("<h2>Status message</h2>");
    match &r.status_message {
        _ if sealed("status_message") => out.push_str(r#"<p class="muted">sealed</p>"#),
        Some(m) => {
            let _ = write!(out, r#"<p id="status-message">{}</p>"#, esc(m));
        }
        None => out.push_str(r#"<p class="muted">none</p>"#),
    }
    out.push_str("<h2>Waiting for</h2>");
    if sealed("input_requests") {
        out.push_str(r#"<p class="muted">sealed</p>"#);
    } else if r.input_requests.is_empty() {
        out.push_str(r#"<p class="muted">no input request outstanding</p>"#);
    } else {
        out.push_str(r#"<ul class="inputs">"#);
        for (key, pending) in &r.input_requests {
            let params = pending.request.params.clone().map(Value::Object);
            let _ = write!(
                out,
                "<li><code>{key}</code> <code>{method}</code>{params}</li>",
                key = esc(key),
                method = esc(&pending.request.method),
                params = params.as_ref().map(pretty).unwrap_or_default(),
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2>Arguments</h2>");
    match &r.arguments {
        _ if sealed("arguments") => out.push_str(r#"<p class="muted">sealed</p>"#),
        Some(a) => {
            let _ = write!(
                out,
                r#"<div id="arguments">{}</div>"#,
                pretty(&a.to_value())
            );
        }
        None if r.status.is_terminal() => {
            out.push_str(r#"<p class="muted">dropped when the task ended</p>"#)
        }
        None => out.push_str(r#"<p class="muted">none</p>"#),
    }
    match &r.outcome {
        _ if sealed("outcome") => out.push_str(r#"<h2>Result</h2><p class="muted">sealed</p>"#),
        Some(TaskOutcome::Result(result)) => {
            out.push_str("<h2>Result</h2>");
            out.push_str(&pretty(&result.to_value()));
        }
        Some(TaskOutcome::Error(e)) => {
            out.push_str("<h2>Error</h2>");
            out.push_str(&pretty(
                &json!({ "code": e.code, "message": e.message, "data": e.data }),
            ));
        }
        _ => {}
    }
    if !r.status.is_terminal() && ctx.role >= super::Role::Full {
        let _ = write!(
            out,
            r#"<form method="post" action="{action}" data-async class="actions">{csrf}<button type="submit" id="cancel" class="danger">Cancel task</button> <output class="muted"></output></form>"#,
            action = esc(&ctx.href(&format!("/tasks/{}/cancel", url_part(&r.id)))),
            csrf = ctx.csrf_field(),
        );
    }
    out
}

/// The task `id`, or 404.
pub(crate) async fn find(shared: &Shared, id: &str) -> Result<Arc<TaskRecord>, Refusal> {
    match shared.operator.get(id).await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(Refusal::new(
            StatusCode::NOT_FOUND,
            format!("no task {id:?} (unknown, expired or purged)"),
        )),
        Err(e) => Err(Refusal::store(&e)),
    }
}

/// `POST /tasks/{id}/cancel`: cancel as the operator (the handler stops
/// wherever it runs). JSON for a script (`Accept: application/json`),
/// else back to the task's page.
pub(crate) async fn cancel(
    State(shared): State<Arc<Shared>>,
    Extension(ctx): Extension<PageCtx>,
    Path(id): Path<String>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    // A bearer caller needs no form: no body, or none of a form's type,
    // is an empty form (a session's then lacks its CSRF token: 403).
    let form = form.map(|Form(form)| form).unwrap_or_default();
    if let Err(refusal) = may_act(&ctx, &form) {
        return refusal.into_response();
    }
    let (status, outcome) = match shared.operator.cancel(&id).await {
        Ok(CancelOutcome::Cancelled) => ("cancelled", "cancelled"),
        Ok(CancelOutcome::AlreadyEnded(s)) => (s.as_str(), "already ended"),
        Err(store::Error::NotFound) => {
            return Refusal::new(
                StatusCode::NOT_FOUND,
                format!("no task {id:?} (unknown, expired or purged)"),
            )
            .into_response()
        }
        Err(e) => return Refusal::store(&e).into_response(),
    };
    let wants_json = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if wants_json {
        let message = if outcome == "cancelled" {
            "cancelled".to_owned()
        } else {
            format!("the task had already ended: {status}")
        };
        return reply::json(
            StatusCode::OK,
            &json!({ "id": id, "status": status, "outcome": outcome, "message": message }),
        );
    }
    let back = ctx.href(&format!("/tasks/{}", url_part(&id)));
    (StatusCode::SEE_OTHER, [(LOCATION, back)]).into_response()
}
