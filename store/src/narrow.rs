//! A filter's narrowing as SQL: conditions on the id, name, state, creation
//! time and labels of `objects`, with their values bound, on both databases.

use vmaas_model::query::Narrowing;

use super::{Dialect, ts};

/// Conditions appended to a query's `WHERE`, and the values they bind.
#[derive(Debug, Default)]
pub(super) struct Where {
    /// ` AND …` for each condition, with `$N` placeholders.
    pub(super) sql: String,
    /// The values of the placeholders, in order.
    pub(super) binds: Vec<String>,
}

/// What a list asks of the columns besides its narrowing: each condition
/// is written only when asked (no `$N IS NULL OR …`), so PostgreSQL's
/// cached plan for it uses the index the condition can.
#[derive(Debug, Clone, Copy)]
pub(super) struct Columns<'a> {
    /// The kind's stored name.
    pub(super) kind: &'a str,
    /// Only this tenant's.
    pub(super) tenant: Option<&'a str>,
    /// Only of this name.
    pub(super) name: Option<&'a str>,
    /// Only in this state.
    pub(super) state: Option<&'a str>,
}

impl Where {
    /// `kind = $1` and the other conditions of `c` and `n`, placeholders numbered from 1.
    pub(super) fn list(c: Columns<'_>, n: &Narrowing, dialect: Dialect) -> Self {
        let mut w = Self { sql: "kind = $1".to_owned(), binds: vec![c.kind.to_owned()] };
        for (column, value) in [("tenant", c.tenant), ("name", c.name), ("state", c.state)] {
            if let Some(v) = value {
                w.binds.push(v.to_owned());
                w.sql += &format!(" AND {column} = ${}", w.binds.len());
            }
        }
        let more = Self::of(n, dialect, w.binds.len() + 1);
        w.sql += &more.sql;
        w.binds.extend(more.binds);
        w
    }

    /// The conditions of `n`, numbering placeholders from `first`.
    fn of(n: &Narrowing, dialect: Dialect, first: usize) -> Self {
        let mut w = Self { sql: String::new(), binds: Vec::new() };
        let bind = |w: &mut Self, v: String| {
            w.binds.push(v);
            format!("${}", first + w.binds.len() - 1)
        };
        for (column, set) in [("id", &n.ids), ("name", &n.names), ("state", &n.states)] {
            if let Some(set) = set {
                let marks: Vec<String> = set.iter().map(|v| bind(&mut w, v.clone())).collect();
                // An empty set matches nothing; `IN ()` is not SQL.
                w.sql += &if marks.is_empty() { " AND 1 = 0".to_owned() } else { format!(" AND {column} IN ({})", marks.join(", ")) };
            }
        }
        if let Some(p) = &n.name_prefix {
            let m = bind(&mut w, p.clone());
            w.sql += &format!(" AND substr(name, 1, length({m})) = {m}");
        }
        for (bound, strict, loose) in [(&n.created_after, ">", ">="), (&n.created_before, "<", "<=")] {
            if let Some((t, inclusive)) = bound {
                let m = bind(&mut w, ts(*t));
                w.sql += &format!(" AND created_at {} {m}", if *inclusive { loose } else { strict });
            }
        }
        for (key, value) in &n.labels {
            // On PostgreSQL, a value is asked with `@>`, which the labels' index answers.
            if let (Dialect::Postgres, Some(v)) = (dialect, value) {
                let m = bind(&mut w, serde_json::json!({ key: v }).to_string());
                w.sql += &format!(" AND ((meta::jsonb) -> 'labels') @> CAST({m} AS jsonb)");
                continue;
            }
            let label = match dialect {
                Dialect::Sqlite => format!("json_extract(meta, {})", bind(&mut w, format!("$.labels.\"{key}\""))),
                Dialect::Postgres => format!("(meta::jsonb -> 'labels' ->> {})", bind(&mut w, key.clone())),
            };
            let test = match value {
                Some(v) => format!(" AND {label} = {}", bind(&mut w, v.clone())),
                None => format!(" AND {label} IS NOT NULL"),
            };
            w.sql += &test;
        }
        w
    }
}
