//! A [`TaskRecord`] as a row, and back.

use std::sync::Arc;

use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::protocol::TaskStatus;
use crate::store::{Era, Error, Result, TaskRecord};

pub(super) fn backend(e: sqlx::Error) -> Error {
    Error::Backend(Box::new(e))
}

pub(super) fn decode(json: &str) -> Result<TaskRecord> {
    serde_json::from_str(json).map_err(|e| Error::Decode(Box::new(e)))
}

pub(super) fn to_i64(n: u64, what: &'static str) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::Encode(format!("{what} {n} exceeds i64").into()))
}

pub(super) fn era_name(era: Era) -> &'static str {
    match era {
        Era::Modern => "modern",
        Era::Legacy => "legacy",
    }
}

/// A tool name as the `tool_name` column holds it: PostgreSQL's text
/// cannot hold NUL, so NUL is U+FFFD there (in the record, and so in what a
/// read hands back, the name is kept exactly).
pub(super) fn tool_column(name: &str) -> String {
    name.replace('\0', "\u{FFFD}")
}

/// A record's row.
pub(super) struct Columns {
    pub(super) id: String,
    pub(super) owner: Option<String>,
    pub(super) era: &'static str,
    pub(super) status: &'static str,
    pub(super) created_at_ms: i64,
    pub(super) updated_at_ms: i64,
    pub(super) expires_at_ms: Option<i64>,
    pub(super) version: i64,
    pub(super) record: String,
    /// Set while `working` under a lease: what `orphans` looks for.
    pub(super) lease_until_ms: Option<i64>,
    /// What an operator's listing filters on.
    pub(super) tool_name: String,
    /// The arguments stored in clear, as JSON text: what an operator's
    /// search reads (through an index of its trigrams); `NULL` when there
    /// are none (dropped, or sealed).
    pub(super) arguments: Option<String>,
}

impl Columns {
    pub(super) fn of(r: TaskRecord) -> Result<Self> {
        let record = serde_json::to_string(&r).map_err(|e| Error::Encode(Box::new(e)))?;
        Ok(Columns {
            era: era_name(r.era),
            status: r.status.as_str(),
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            expires_at_ms: r.expires_at_ms(),
            version: to_i64(r.version, "version")?,
            lease_until_ms: match (&r.status, &r.lease) {
                (TaskStatus::Working, Some(lease)) => Some(lease.until_ms),
                _ => None,
            },
            arguments: r.arguments.as_ref().map(|a| a.get().to_owned()),
            id: r.id,
            owner: r.owner,
            tool_name: tool_column(&r.tool_name),
            record,
        })
    }
}

/// Decode rows whose first column is the record JSON.
pub(super) fn records<R: Row>(rows: &[R]) -> Result<Vec<Arc<TaskRecord>>>
where
    for<'a> String: Decode<'a, R::Database> + Type<R::Database>,
    usize: ColumnIndex<R>,
{
    rows.iter()
        .map(|row| {
            let json: String = row.try_get(0).map_err(backend)?;
            decode(&json).map(Arc::new)
        })
        .collect()
}

/// Bind a row's columns as `$1`..`$12`, in the order of `insert` (and of
/// `replace`, whose `$13` is the expected version).
pub(super) fn bind_row<'q, DB>(
    query: sqlx::query::Query<'q, DB, DB::Arguments>,
    c: &'q Columns,
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    DB: sqlx::Database,
    for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    query
        .bind(c.id.as_str())
        .bind(c.owner.as_deref())
        .bind(c.era)
        .bind(c.status)
        .bind(c.created_at_ms)
        .bind(c.updated_at_ms)
        .bind(c.expires_at_ms)
        .bind(c.version)
        .bind(c.record.as_str())
        .bind(c.lease_until_ms)
        .bind(c.tool_name.as_str())
        .bind(c.arguments.as_deref())
}
