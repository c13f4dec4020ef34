//! The arrays of a claim round's `UPDATE` (`Dialect::claim_update`), one
//! list of them for two uses: bound as parameters, or written into the
//! statement's text as literals, so that the claims' connection sends the
//! `UPDATE` and its `COMMIT` as one query (`claims.rs`, issue 33).
//!
//! A literal is written for a session whose `standard_conforming_strings`
//! is on (the claims' connection sets it): a string between single
//! quotes, each quote in it doubled, and nothing else special; a text
//! with a NUL in it (which a query's text cannot carry) is not written,
//! and the round binds its parameters instead. Integers are written by
//! Rust's formatter, after `[` or `,`, so a minus sign never meets
//! another.

use std::fmt::Write as _;

use super::row::Columns;

/// Where the arrays go, one call per parameter, in order.
pub(super) trait Arrays<'q>: Sized {
    /// With a `text[]` parameter.
    #[must_use]
    fn texts(self, values: Vec<Option<&'q str>>) -> Self;
    /// With an `int8[]` parameter.
    #[must_use]
    fn ints(self, values: Vec<Option<i64>>) -> Self;
}

/// The thirteen arrays of `claim_update` for the claimed rows `rows`,
/// each read at its version in `expected`.
pub(super) fn claim_arrays<'q, A: Arrays<'q>>(
    rows: &'q [&'q Columns],
    expected: &'q [i64],
    out: A,
) -> A {
    let text = |f: fn(&'q Columns) -> Option<&'q str>| rows.iter().map(|c| f(c)).collect();
    let int = |f: fn(&Columns) -> Option<i64>| rows.iter().map(|c| f(c)).collect();
    out.texts(text(|c| Some(&c.id)))
        .texts(text(|c| c.owner.as_deref()))
        .texts(text(|c| Some(c.era)))
        .texts(text(|c| Some(c.status)))
        .ints(int(|c| Some(c.created_at_ms)))
        .ints(int(|c| Some(c.updated_at_ms)))
        .ints(int(|c| c.expires_at_ms))
        .ints(int(|c| Some(c.version)))
        .texts(text(|c| Some(&c.record)))
        .ints(int(|c| c.lease_until_ms))
        .texts(text(|c| Some(&c.tool_name)))
        .texts(text(|c| c.arguments.as_deref()))
        .ints(expected.iter().map(|v| Some(*v)).collect())
}

/// The arrays as literals, comma-separated: `ARRAY['a',NULL]::text[]`.
#[derive(Debug, Default)]
pub(super) struct Literals {
    sql: String,
    /// A text held a NUL.
    unwritable: bool,
}

impl Literals {
    /// The parameters' text, or `None` if one cannot be written.
    pub(super) fn finish(self) -> Option<String> {
        (!self.unwritable).then_some(self.sql)
    }

    fn array<T>(&mut self, values: Vec<Option<T>>, ty: &str, write: impl Fn(&mut String, T)) {
        if !self.sql.is_empty() {
            self.sql.push_str(", ");
        }
        self.sql.push_str("ARRAY[");
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.sql.push(',');
            }
            match value {
                Some(v) => write(&mut self.sql, v),
                None => self.sql.push_str("NULL"),
            }
        }
        self.sql.push_str("]::");
        self.sql.push_str(ty);
    }
}

impl<'q> Arrays<'q> for Literals {
    fn texts(mut self, values: Vec<Option<&'q str>>) -> Self {
        self.unwritable |= values.iter().flatten().any(|s| s.contains('\0'));
        self.array(values, "text[]", quote);
        self
    }

    fn ints(mut self, values: Vec<Option<i64>>) -> Self {
        self.array(values, "int8[]", |sql, n| {
            let _ = write!(sql, "{n}");
        });
        self
    }
}

/// `text` as a string literal under `standard_conforming_strings = on`.
fn quote(sql: &mut String, text: &str) {
    sql.reserve(text.len() + 2);
    sql.push('\'');
    for (i, part) in text.split('\'').enumerate() {
        if i > 0 {
            sql.push_str("''");
        }
        sql.push_str(part);
    }
    sql.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_doubled_and_nothing_else_changes() {
        let l = Literals::default()
            .texts(vec![
                Some("it's"),
                None,
                Some(r"back\slash $$ -- '); DROP TABLE t; --"),
                Some("é✓"),
            ])
            .ints(vec![Some(-5), None, Some(i64::MAX)]);
        assert_eq!(
            l.finish().unwrap(),
            r"ARRAY['it''s',NULL,'back\slash $$ -- ''); DROP TABLE t; --','é✓']::text[], ARRAY[-5,NULL,9223372036854775807]::int8[]"
        );
    }

    #[test]
    fn a_nul_is_not_written() {
        let l = Literals::default().texts(vec![Some("a\0b")]);
        assert_eq!(l.finish(), None);
    }
}
