//! A [`TaskRecord`] as the arguments of the write scripts, and back.

use crate::protocol::TaskStatus;
use crate::store::{Error, Result, TaskRecord};

use super::keys::member_of;

/// How long a task's key outlives the record's expiry: Redis's own TTL is a
/// safety net for a store nobody reaps, never what hides a record (`get`,
/// `list` and `orphans` compare `expires_at_ms` with the layer's `now_ms`).
const KEY_TTL_MARGIN_MS: i64 = 60_000;

/// Expiries further away than this (about 100 years) get no key TTL.
const MAX_KEY_TTL_MS: i64 = 100 * 365 * 24 * 3_600_000;

/// The script arguments of one record.
pub(super) struct Fields {
    pub(super) version: String,
    pub(super) record: String,
    /// `expires_at_ms`, or empty.
    pub(super) expires: String,
    /// The lease end of a `working` task, or empty: what `orphans` reads.
    pub(super) lease: String,
    /// The lease holder of a `working` task, or empty: what an operator's
    /// counts read.
    pub(super) holder: String,
    pub(super) status: &'static str,
    pub(super) updated: String,
    pub(super) member: String,
    /// The key's TTL in ms, or empty: the time left at this write (by the
    /// record's own clock, so the server's clock does not matter) plus
    /// the margin.
    pub(super) key_ttl: String,
}

impl Fields {
    pub(super) fn of(r: &TaskRecord) -> Result<Self> {
        let record = serde_json::to_string(r).map_err(|e| Error::Encode(Box::new(e)))?;
        let expires = r.expires_at_ms();
        let key_ttl = expires
            .map(|at| {
                at.saturating_sub(r.updated_at_ms)
                    .max(0)
                    .saturating_add(KEY_TTL_MARGIN_MS)
            })
            .filter(|ttl| *ttl <= MAX_KEY_TTL_MS);
        let (lease, holder) = match (&r.status, &r.lease) {
            (TaskStatus::Working, Some(lease)) => (Some(lease.until_ms), lease.holder.as_str()),
            _ => (None, ""),
        };
        Ok(Fields {
            version: r.version.to_string(),
            record,
            expires: text(expires),
            lease: text(lease),
            holder: holder.to_owned(),
            status: r.status.as_str(),
            updated: r.updated_at_ms.to_string(),
            member: member_of(r),
            key_ttl: text(key_ttl),
        })
    }
}

fn text(n: Option<i64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// A stored record's JSON.
pub(super) fn decode(json: &str) -> Result<TaskRecord> {
    serde_json::from_str(json).map_err(|e| Error::Decode(Box::new(e)))
}
