//! The task list: the operator API's filters (status, tool, owner,
//! created before/after, search in the arguments) as a form, one page of
//! tasks, newest first, and a link to the next page (its cursor).

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Deserialize;

use super::html::{badge, esc, push_esc, time_ago, url_part, PageCtx, STATUSES};
use super::reply::Refusal;
use crate::protocol::TaskStatus;
use crate::store::{TaskCursor, TaskQuery, TaskRecord, DEFAULT_PAGE};

/// The list's query string, as typed in its form (empty fields are no
/// filter).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub(crate) struct ListParams {
    status: String,
    tool: String,
    owner: String,
    search: String,
    /// `YYYY-MM-DDTHH:MM` or RFC 3339, UTC unless an offset is given.
    created_after: String,
    created_before: String,
    limit: String,
    after: String,
}

impl ListParams {
    /// The operator query these ask for, or why they cannot be one (400).
    pub(crate) fn query(&self) -> Result<TaskQuery, Refusal> {
        let mut query = TaskQuery::new();
        if let Some(status) = some(&self.status) {
            let status = TaskStatus::from_wire(status).ok_or_else(|| {
                Refusal::bad_request(format!(
                    "status {status:?} is not one of working, input_required, completed, failed, cancelled"
                ))
            })?;
            query = query.status(status);
        }
        if let Some(tool) = some(&self.tool) {
            query = query.tool(tool);
        }
        if let Some(owner) = some(&self.owner) {
            query = query.owner(owner);
        }
        if let Some(text) = some(&self.search) {
            query = query.search(text);
        }
        if let Some(at) = some(&self.created_after) {
            query = query.created_after_ms(parse_time("created_after", at)?);
        }
        if let Some(at) = some(&self.created_before) {
            query = query.created_before_ms(parse_time("created_before", at)?);
        }
        let limit = match some(&self.limit) {
            Some(n) => n
                .parse::<usize>()
                .map_err(|_| Refusal::bad_request(format!("limit {n:?} is not a whole number")))?,
            None => DEFAULT_PAGE,
        };
        query = query.limit(limit);
        if let Some(after) = some(&self.after) {
            let cursor: TaskCursor = after.parse().map_err(|_| {
                Refusal::bad_request(format!("after {after:?} is not a cursor of this list"))
            })?;
            query = query.after(cursor);
        }
        Ok(query)
    }

    /// These parameters as a query string with `after` replaced.
    fn with_after(&self, cursor: &TaskCursor) -> String {
        let fields = [
            ("status", self.status.as_str()),
            ("tool", &self.tool),
            ("owner", &self.owner),
            ("search", &self.search),
            ("created_after", &self.created_after),
            ("created_before", &self.created_before),
            ("limit", &self.limit),
        ];
        let mut q = String::new();
        for (name, value) in fields.iter().filter(|(_, v)| !v.trim().is_empty()) {
            let _ = write!(q, "{name}={}&", url_part(value));
        }
        let _ = write!(q, "after={}", url_part(&cursor.to_string()));
        q
    }
}

fn some(field: &str) -> Option<&str> {
    Some(field.trim()).filter(|f| !f.is_empty())
}

/// A time from the form: RFC 3339, or `YYYY-MM-DDTHH:MM[:SS]` in UTC (what
/// a `datetime-local` field sends), as Unix milliseconds.
fn parse_time(field: &str, text: &str) -> Result<i64, Refusal> {
    use time::format_description::well_known::Rfc3339;
    use time::{macros::format_description, OffsetDateTime, PrimitiveDateTime};
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .or_else(|| {
            PrimitiveDateTime::parse(
                text,
                format_description!("[year]-[month]-[day]T[hour]:[minute]"),
            )
            .ok()
            .map(PrimitiveDateTime::assume_utc)
        })
        .or_else(|| {
            PrimitiveDateTime::parse(
                text,
                format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
            )
            .ok()
            .map(PrimitiveDateTime::assume_utc)
        });
    let t = parsed.ok_or_else(|| {
        Refusal::bad_request(format!(
            "{field} {text:?} is not a time (YYYY-MM-DDTHH:MM in UTC, or RFC 3339)"
        ))
    })?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| Refusal::bad_request(format!("{field} {text:?} is out of range")))
}

/// Tasks as a table: id (a link to its page), status, tool, owner,
/// created, updated, worker.
pub(crate) fn table(ctx: &PageCtx, tasks: &[Arc<TaskRecord>], now: i64) -> String {
    if tasks.is_empty() {
        return r#"<p class="muted">No task.</p>"#.to_owned();
    }
    let mut out = String::from(
        "<table class=\"tasks\"><thead><tr><th>ID</th><th>Status</th><th>Tool</th><th>Owner</th>\
         <th>Created</th><th>Updated</th><th>Worker</th></tr></thead><tbody>",
    );
    for t in tasks {
        let _ = write!(
            out,
            r#"<tr data-task="{id}"><td><a href="{href}"><code>{id}</code></a></td><td>{status}</td><td>{tool}</td><td>{owner}</td><td>{created}</td><td>{updated}</td><td>{worker}</td></tr>"#,
            id = esc(&t.id),
            href = esc(&ctx.href(&format!("/tasks/{}", url_part(&t.id)))),
            status = badge(t.status),
            tool = esc(&t.tool_name),
            owner = esc(t.owner.as_deref().unwrap_or("-")),
            created = time_ago(t.created_at_ms, now),
            updated = time_ago(t.updated_at_ms, now),
            worker = esc(&worker(t)),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// Who runs a `working` task: its lease holder, `(queued)`, or `-`.
pub(crate) fn worker(r: &TaskRecord) -> String {
    match (&r.status, &r.lease) {
        (TaskStatus::Working, Some(lease)) if lease.is_queued() => "(queued)".to_owned(),
        (TaskStatus::Working, Some(lease)) => lease.holder.clone(),
        _ => "-".to_owned(),
    }
}

/// The filter form, filled with `params`.
fn form(ctx: &PageCtx, params: &ListParams, searchable: bool) -> String {
    let mut statuses = String::from(r#"<option value="">any</option>"#);
    for s in STATUSES {
        let selected = if params.status.trim() == s.as_str() {
            " selected"
        } else {
            ""
        };
        let _ = write!(statuses, r#"<option{selected}>{}</option>"#, s.as_str());
    }
    let field = |name: &str, label: &str, value: &str, kind: &str| {
        let mut f = String::new();
        let _ = write!(
            f,
            r#"<label>{label} <input type="{kind}" name="{name}" value="{}"></label> "#,
            esc(value)
        );
        f
    };
    let search_note = if searchable {
        ""
    } else {
        r#" <span class="muted">(this store seals arguments: a search finds nothing)</span>"#
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<form method="get" action="{action}" class="filters"><label>Status <select name="status">{statuses}</select></label> {tool}{owner}{search}{after}{before}<button type="submit">Filter</button>{search_note}</form>"#,
        action = esc(&ctx.href("/tasks")),
        tool = field("tool", "Tool", &params.tool, "text"),
        owner = field("owner", "Owner", &params.owner, "text"),
        search = field("search", "Arguments contain", &params.search, "search"),
        after = field(
            "created_after",
            "Created after (UTC)",
            &params.created_after,
            "text"
        ),
        before = field(
            "created_before",
            "Created before (UTC)",
            &params.created_before,
            "text"
        ),
    );
    out
}

/// The list page's body: the form, the table, the next page's link.
pub(crate) fn body(
    ctx: &PageCtx,
    params: &ListParams,
    tasks: &[Arc<TaskRecord>],
    next: Option<&TaskCursor>,
    searchable: bool,
    now: i64,
) -> String {
    let mut out = form(ctx, params, searchable);
    if tasks.is_empty() && next.is_some() {
        // The store's walk stopped at its budget (`WALK_BUDGET`).
        out.push_str(
            r#"<p class="muted">No match among the tasks this page read; the next page reads on.</p>"#,
        );
    } else {
        out.push_str(&table(ctx, tasks, now));
    }
    if let Some(cursor) = next {
        out.push_str(r#"<p class="pager"><a rel="next" href=""#);
        push_esc(
            &mut out,
            &format!("{}?{}", ctx.href("/tasks"), params.with_after(cursor)),
        );
        out.push_str(r#"">Next page →</a></p>"#);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_become_a_query_or_a_precise_refusal() {
        let p = ListParams {
            status: "input_required".into(),
            created_after: "2026-01-02T03:04".into(),
            limit: "20".into(),
            ..ListParams::default()
        };
        let q = p.query().unwrap();
        assert_eq!(q.statuses(), &[TaskStatus::InputRequired]);
        assert_eq!(q.created_after(), Some(1_767_323_040_000));
        assert_eq!(q.page_size(), 20);
        for bad in [
            ListParams {
                status: "done".into(),
                ..ListParams::default()
            },
            ListParams {
                created_before: "yesterday".into(),
                ..ListParams::default()
            },
            ListParams {
                after: "junk".into(),
                ..ListParams::default()
            },
            ListParams {
                limit: "-1".into(),
                ..ListParams::default()
            },
        ] {
            assert_eq!(p_status(&bad), 400, "{bad:?}");
        }
    }

    fn p_status(p: &ListParams) -> u16 {
        p.query().err().map_or(200, |r| r.status.as_u16())
    }
}
