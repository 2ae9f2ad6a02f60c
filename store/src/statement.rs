//! A statement built in parts: its text and the values it binds, `$1`
//! onwards, so that the placeholders and the values can never disagree.

use sqlx::AssertSqlSafe;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

/// One value bound to a statement.
pub(super) enum Value {
    Text(String),
    Int(i64),
}

/// A statement's parts and its values, `$1` onwards.
#[derive(Default)]
pub(super) struct Statement {
    /// The parts of the statement (for a `WITH`, its queries).
    pub(super) parts: Vec<String>,
    values: Vec<Value>,
}

impl Statement {
    /// The placeholder the next value takes.
    pub(super) fn next(&self) -> usize {
        self.values.len() + 1
    }

    /// `VALUES` rows of `width` placeholders each, for `rows` rows, from the next.
    pub(super) fn rows(&self, rows: usize, width: usize) -> String {
        placeholders(self.next(), rows, width)
    }

    /// Binds a text value.
    pub(super) fn text(&mut self, v: impl Into<String>) {
        self.values.push(Value::Text(v.into()));
    }

    /// Binds an integer value.
    pub(super) fn int(&mut self, v: i64) {
        self.values.push(Value::Int(v));
    }

    /// The query of `sql` with every value bound, in order.
    pub(super) fn bind<'q>(self, sql: &'q str) -> Query<'q, sqlx::Any, AnyArguments> {
        self.values.into_iter().fold(sqlx::query(AssertSqlSafe(sql)), |q, v| match v {
            Value::Text(s) => q.bind(s),
            Value::Int(i) => q.bind(i),
        })
    }
}

/// `VALUES` rows of `width` placeholders each, for `rows` rows, numbered from `$first`.
pub(super) fn placeholders(first: usize, rows: usize, width: usize) -> String {
    let row = |r: usize| format!("({})", (0..width).map(|c| format!("${}", first + r * width + c)).collect::<Vec<_>>().join(", "));
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_number_rows_one_after_another() {
        assert_eq!(placeholders(4, 2, 3), "($4, $5, $6), ($7, $8, $9)");
        let mut st = Statement::default();
        st.text("a");
        st.int(1);
        assert_eq!(st.rows(1, 2), "($3, $4)");
    }
}
