//! The SQL of the operator API: a [`TaskQuery`] as a `WHERE` clause, and
//! the statements of listing, purging and counting.
//!
//! A listing is `ORDER BY created_at_ms DESC, id DESC LIMIT n` from the
//! cursor's `(created_at_ms, id) < (…)`: the engine walks an index on
//! `(created_at_ms, id)` backwards (or on `(status, created_at_ms, id)`,
//! `(tool_name, created_at_ms, id)` under one status or one tool) and stops
//! at the page's end, whatever the size of the table.

use super::dialect::Dialect;
use super::row::tool_column;
use super::statements::quote;
use crate::store::operator::{TaskQuery, LONGEST_WAITING};
use crate::store::Lease;
use crate::store::WALK_BUDGET;

/// A bound parameter.
pub(super) enum Arg {
    Int(i64),
    Text(String),
}

/// A statement and its parameters, `$1` first.
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) args: Vec<Arg>,
}

impl Sql {
    /// Bind `arg` as the next parameter; its placeholder.
    fn arg(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }
}

/// The live rows `query` matches: a `WHERE` clause (without the word),
/// `$1` being `now_ms`. A search reads the text's index, or each row's
/// text when `by_row` (a walk's few rows).
fn matching(d: &Dialect, table: &str, query: &TaskQuery, now_ms: i64, by_row: bool) -> Sql {
    let mut s = Sql {
        text: String::new(),
        args: Vec::new(),
    };
    let now = s.arg(Arg::Int(now_ms));
    let mut conds = vec![format!("(expires_at_ms IS NULL OR expires_at_ms > {now})")];
    if !query.statuses().is_empty() {
        let list: Vec<String> = query
            .statuses()
            .iter()
            .map(|st| s.arg(Arg::Text(st.as_str().to_owned())))
            .collect();
        conds.push(format!("status IN ({})", list.join(", ")));
    }
    if let Some(tool) = query.tool_name() {
        conds.push(format!(
            "tool_name = {}",
            s.arg(Arg::Text(tool_column(tool)))
        ));
    }
    if let Some(owner) = query.owner_key() {
        conds.push(format!("owner = {}", s.arg(Arg::Text(owner.to_owned()))));
    }
    conds.extend(positions(&mut s, query));
    if let Some(text) = query.search_text() {
        let p = s.arg(Arg::Text((d.search_pattern)(text)));
        let search = if by_row { d.search_row } else { d.search };
        conds.push(
            search
                .replace("{t}", &quote(table))
                .replace("{n}", table)
                .replace("{p}", &p),
        );
    }
    s.text = conds.join(" AND ");
    s
}

/// The conditions on a row's place in the creation index that `query`
/// sets: below its cursor, within its creation times.
fn positions(s: &mut Sql, query: &TaskQuery) -> Vec<String> {
    let mut conds = Vec::new();
    if let Some(at) = query.created_after() {
        conds.push(format!("created_at_ms >= {}", s.arg(Arg::Int(at))));
    }
    if let Some(at) = query.created_before() {
        conds.push(format!("created_at_ms < {}", s.arg(Arg::Int(at))));
    }
    if let Some(cursor) = query.cursor() {
        let (created, id) = cursor.position();
        let created = s.arg(Arg::Int(created));
        let id = s.arg(Arg::Text(id.to_owned()));
        conds.push(format!("(created_at_ms, id) < ({created}, {id})"));
    }
    conds
}

/// One page of what `query` matches, newest first.
pub(super) fn find(d: &Dialect, table: &str, query: &TaskQuery, now_ms: i64) -> Sql {
    page(d, table, query, matching(d, table, query, now_ms, false))
}

/// The rows of the creation index one walk reads.
const SQL_WALK: usize = WALK_BUDGET;

/// Where a walk of at most [`SQL_WALK`] rows of the creation index
/// below `query`'s cursor, within its creation times, ends:
/// `(created_at_ms, id)` of its last row, or no row if fewer are left (the
/// walk then reaches the range's end, and the listing its last page).
/// Reads the `(created_at_ms, id)` index alone.
pub(super) fn walk_end(table: &str, query: &TaskQuery) -> Sql {
    let mut s = Sql {
        text: String::new(),
        args: Vec::new(),
    };
    let conds = positions(&mut s, query);
    let within = if conds.is_empty() {
        String::new()
    } else {
        format!("WHERE {} ", conds.join(" AND "))
    };
    s.text = format!(
        "SELECT created_at_ms, id FROM {} {within}ORDER BY created_at_ms DESC, id DESC \
         LIMIT 1 OFFSET {}",
        quote(table),
        SQL_WALK - 1
    );
    s
}

/// [`find`] as a walk reads it: of the rows from `end` (included) up, or
/// of every row below the cursor when fewer than a walk's are left; a
/// search reads each row's text.
pub(super) fn find_down_to(
    d: &Dialect,
    table: &str,
    query: &TaskQuery,
    now_ms: i64,
    end: Option<(i64, &str)>,
) -> Sql {
    let mut s = matching(d, table, query, now_ms, true);
    if let Some((created, id)) = end {
        let created = s.arg(Arg::Int(created));
        let id = s.arg(Arg::Text(id.to_owned()));
        s.text
            .push_str(&format!(" AND (created_at_ms, id) >= ({created}, {id})"));
    }
    page(d, table, query, s)
}

/// One page, newest first, of the rows `s` (a `WHERE` clause) selects.
fn page(d: &Dialect, table: &str, query: &TaskQuery, mut s: Sql) -> Sql {
    let limit = s.arg(Arg::Int(page_size(query)));
    s.text = format!(
        "SELECT {} FROM {} WHERE {} ORDER BY created_at_ms DESC, id DESC LIMIT {limit}",
        d.json_column,
        quote(table),
        s.text
    );
    s
}

/// Delete one page of the terminal rows `query` matches; `None` when it
/// asks for no terminal status.
pub(super) fn purge(d: &Dialect, table: &str, query: &TaskQuery, now_ms: i64) -> Option<Sql> {
    let query = query.terminal_only()?;
    let mut s = matching(d, table, &query, now_ms, false);
    let limit = s.arg(Arg::Int(page_size(&query)));
    let t = quote(table);
    let ids = format!(
        "SELECT id FROM {t} WHERE {} ORDER BY created_at_ms DESC, id DESC LIMIT {limit}",
        s.text
    );
    s.text = d.delete_ids.replace("{t}", &t).replace("{ids}", &ids);
    Some(s)
}

fn page_size(query: &TaskQuery) -> i64 {
    i64::try_from(query.page_size()).unwrap_or(i64::MAX)
}

/// The statements of `stats`, each with `$1` = `now_ms`.
#[derive(Debug)]
pub(super) struct StatsSql {
    /// `(status, count)` of live rows.
    pub(super) by_status: String,
    /// `(holder, count)` of `working` rows under a live lease.
    pub(super) running: String,
    /// `(count)` of queued rows.
    pub(super) queued: String,
    /// `(id, lease_until_ms)` of the queued row queued first.
    pub(super) oldest_queued: String,
    /// `(id, updated_at_ms)` of the `input_required` rows waiting longest,
    /// longest first, at most [`LONGEST_WAITING`].
    pub(super) oldest_input: String,
    /// `(status, span, count)` of the live rows that ended at or after
    /// `$2`, before `$1`, in spans of `$3` ms from `$2`.
    pub(super) ended: String,
}

impl StatsSql {
    pub(super) fn new(d: &Dialect, table: &str) -> Self {
        let t = quote(table);
        let live = "(expires_at_ms IS NULL OR expires_at_ms > $1)";
        let holder = d.lease_holder;
        let queued = format!(
            "FROM {t} WHERE status = 'working' AND lease_until_ms < $1 \
             AND {holder} = '{}' AND {live}",
            Lease::QUEUED
        );
        StatsSql {
            by_status: format!("SELECT status, count(*) FROM {t} WHERE {live} GROUP BY status"),
            running: format!(
                "SELECT {holder}, count(*) FROM {t} WHERE status = 'working' \
                 AND lease_until_ms >= $1 AND {live} GROUP BY {holder}"
            ),
            queued: format!("SELECT count(*) {queued}"),
            oldest_queued: format!(
                "SELECT id, lease_until_ms {queued} ORDER BY lease_until_ms, id LIMIT 1"
            ),
            ended: format!(
                "SELECT status, (updated_at_ms - $2) / $3, count(*) FROM {t} \
                 WHERE status IN ('completed', 'failed', 'cancelled') \
                 AND updated_at_ms >= $2 AND updated_at_ms < $1 AND {live} \
                 GROUP BY 1, 2"
            ),
            oldest_input: format!(
                "SELECT id, updated_at_ms FROM {t} WHERE status = 'input_required' \
                 AND {live} ORDER BY updated_at_ms, id LIMIT {LONGEST_WAITING}"
            ),
        }
    }
}
