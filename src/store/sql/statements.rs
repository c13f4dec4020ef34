//! The SQL of one table, written once when the store opens.

use std::sync::Arc;

use sqlx::AssertSqlSafe;

use super::dialect::Dialect;

/// The statements of one table, built once.
#[derive(Debug)]
pub(super) struct Statements {
    pub(super) insert: Arc<str>,
    pub(super) get: Arc<str>,
    pub(super) replace: Arc<str>,
    pub(super) exists: Arc<str>,
    pub(super) reap: Arc<str>,
    pub(super) orphans: Arc<str>,
    /// `orphans`, holding the rows for a claim.
    pub(super) claimable: Arc<str>,
    /// The claims of a round in one statement (`Dialect::claim_update`).
    pub(super) claim_update: Option<Arc<str>>,
    /// By owner (`Some`/`None`) and whether a position is given; always of
    /// one era.
    pub(super) list: [[Arc<str>; 2]; 2],
    pub(super) migrations_table: String,
    pub(super) migrations_version: String,
    pub(super) migrations_insert: String,
    pub(super) migrations: Vec<Vec<String>>,
}

pub(super) fn quote(ident: &str) -> String {
    // Table names are validated, so there is nothing to escape.
    format!("\"{ident}\"")
}

impl Statements {
    pub(super) fn new(d: &Dialect, table: &str) -> Self {
        let t = quote(table);
        let m = quote(&format!("{table}_migrations"));
        let (json, rec) = (d.json_param, d.json_column);
        let list = |owner: bool, after: bool| -> Arc<str> {
            let (mut sql, mut n) = (
                format!(
                    "SELECT {rec} FROM {t} WHERE (expires_at_ms IS NULL OR expires_at_ms > $1)"
                ),
                2,
            );
            if owner {
                sql += &format!(" AND owner = ${n}");
                n += 1;
            } else {
                sql += " AND owner IS NULL";
            }
            sql += &format!(" AND era = ${n}");
            n += 1;
            if after {
                sql += &format!(" AND (created_at_ms, id) < (${}, ${})", n, n + 1);
                n += 2;
            }
            sql += &format!(" ORDER BY created_at_ms DESC, id DESC LIMIT ${n}");
            sql.into()
        };
        let orphans = format!(
            "SELECT {rec} FROM {t} WHERE lease_until_ms < $1 AND status = 'working' \
             AND (expires_at_ms IS NULL OR expires_at_ms > $1) \
             ORDER BY lease_until_ms LIMIT $2"
        );
        Statements {
            insert: format!(
                "INSERT INTO {t} (id, owner, era, status, created_at_ms, updated_at_ms, \
                 expires_at_ms, version, record, lease_until_ms, tool_name, arguments) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9{json}, $10, $11, $12) \
                 ON CONFLICT (id) DO NOTHING"
            )
            .into(),
            get: format!(
                "SELECT {rec} FROM {t} WHERE id = $1 \
                 AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
            )
            .into(),
            replace: format!(
                "UPDATE {t} SET owner = $2, era = $3, status = $4, created_at_ms = $5, \
                 updated_at_ms = $6, expires_at_ms = $7, version = $8, record = $9{json}, \
                 lease_until_ms = $10, tool_name = $11, arguments = $12 \
                 WHERE id = $1 AND version = $13"
            )
            .into(),
            exists: format!("SELECT 1 FROM {t} WHERE id = $1").into(),
            reap: d.reap.replace("{t}", &t).into(),
            orphans: orphans.as_str().into(),
            claimable: format!("{orphans}{}", d.claim_lock).into(),
            claim_update: d.claim_update.map(|u| u.replace("{t}", &t).into()),
            list: [
                [list(false, false), list(false, true)],
                [list(true, false), list(true, true)],
            ],
            migrations_table: d.migrations_table.replace("{m}", &m),
            migrations_version: format!("SELECT COALESCE(MAX(version), 0) FROM {m}"),
            migrations_insert: format!("INSERT INTO {m} (version, applied_at_ms) VALUES ($1, $2)"),
            migrations: d
                .migrations
                .iter()
                .map(|step| {
                    step.iter()
                        .map(|s| s.replace("{t}", &t).replace("{n}", table))
                        .collect()
                })
                .collect(),
        }
    }
}

/// A statement of [`Statements`] as sqlx takes it.
pub(super) fn sql(s: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
    // Built from a validated table name and constants only.
    AssertSqlSafe(Arc::clone(s))
}
