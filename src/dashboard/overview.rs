//! The overview: counts by status, throughput and failures over the last
//! hour, the tasks waiting longest (for a worker, for their client's
//! answers: the ten waiting longest for input listed), and the running
//! tasks by worker.

use std::fmt::Write as _;

use super::html::{esc, url_part, PageCtx, STATUSES};
use super::list;
use super::Shared;
use crate::store::{self, Span, TaskStats, WaitingTask};

/// Counts by status as cards, each a link to the list of those tasks;
/// the script updates `data-count` elements on every page.
pub(crate) fn counts(ctx: &PageCtx, stats: &TaskStats) -> String {
    let mut out = String::from(r#"<section class="counts">"#);
    for s in STATUSES {
        let name = s.as_str();
        let _ = write!(
            out,
            r#"<a class="card s-{name}" href="{href}"><span class="n" data-count="{name}">{n}</span><span class="label">{name}</span></a>"#,
            href = esc(&ctx.href(&format!("/tasks?status={name}"))),
            n = stats.count(s),
        );
    }
    let _ = write!(
        out,
        r#"<span class="card"><span class="n" data-count="queued">{}</span><span class="label">queued</span></span></section>"#,
        stats.queued
    );
    out
}

fn waiting_line(ctx: &PageCtx, stats: &TaskStats, label: &str, w: Option<&WaitingTask>) -> String {
    match w {
        Some(w) => format!(
            r#"<li>{label}: <a href="{href}"><code>{id}</code></a>, waiting {waited}</li>"#,
            href = esc(&ctx.href(&format!("/tasks/{}", url_part(&w.id)))),
            id = esc(&w.id),
            waited = Span(i64::try_from(stats.waited(w).as_millis()).unwrap_or(i64::MAX)),
        ),
        None => format!(r#"<li>{label}: <span class="muted">none</span></li>"#),
    }
}

/// The overview's live part (everything below the title), as of `now`,
/// with counts read no earlier than `since`.
pub(crate) async fn render(
    shared: &Shared,
    ctx: &PageCtx,
    now: i64,
    since: tokio::time::Instant,
) -> store::Result<String> {
    let operator = &shared.operator;
    let stats = shared.stats(since).await?;
    let throughput = shared.chart(since).await?;
    // The tasks waiting longest for input, longest first: each read by id
    // (at most `LONGEST_WAITING`), gone ones left out.
    let mut waiting = Vec::new();
    for w in &stats.longest_input_required {
        if let Some(r) = operator.get(&w.id).await? {
            waiting.push(r);
        }
    }
    let mut out = counts(ctx, &stats);
    out.push_str("<section><h2>Throughput and failures</h2>");
    out.push_str(&throughput.svg());
    out.push_str("</section><section><h2>Waiting longest</h2><ul>");
    out.push_str(&waiting_line(
        ctx,
        &stats,
        "Oldest waiting for its client's input",
        stats.oldest_input_required.as_ref(),
    ));
    out.push_str(&waiting_line(
        ctx,
        &stats,
        "Oldest queued for a worker",
        stats.oldest_queued.as_ref(),
    ));
    out.push_str("</ul>");
    let _ = write!(
        out,
        r#"<h3>Waiting longest for input <a class="small" href="{}">all</a></h3>"#,
        esc(&ctx.href("/tasks?status=input_required"))
    );
    out.push_str(&list::table(ctx, &waiting, now));
    out.push_str("</section><section><h2>Running, by worker</h2>");
    if stats.running_by_holder.is_empty() {
        out.push_str(r#"<p class="muted">No task runs under a live lease.</p>"#);
    } else {
        out.push_str("<table><thead><tr><th>Worker</th><th>Tasks</th></tr></thead><tbody>");
        for (holder, n) in &stats.running_by_holder {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{n}</td></tr>",
                esc(holder)
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    Ok(out)
}
