//! A create on PostgreSQL in one statement: the object, its references,
//! the counters it moves, its links and its event, as the parts of one
//! `WITH`. Inside an admission, which holds the lock every replica's
//! admissions wait on, it is one round trip where it was five. The
//! references are checked at the end of the statement, so they find the
//! object made in it; a name taken or a reference missing fails the
//! statement, and nothing of it stays.

use sqlx::AssertSqlSafe;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

use super::events::{self, EventType};
use super::row::{COLUMNS, NewObject, refused};
use super::{StoreError, links, ts, usage};

/// One value bound to the statement.
enum Value {
    Text(String),
    Int(i64),
}

/// The statement's text and its values, `$1` onwards.
#[derive(Default)]
struct Statement {
    parts: Vec<String>,
    values: Vec<Value>,
}

impl Statement {
    /// The placeholder the next value takes.
    fn next(&self) -> usize {
        self.values.len() + 1
    }

    /// `VALUES` rows of `width` placeholders each, for `rows` rows, from the next.
    fn rows(&self, rows: usize, width: usize) -> String {
        let first = self.next();
        let row = |r: usize| format!("({})", (0..width).map(|c| format!("${}", first + r * width + c)).collect::<Vec<_>>().join(", "));
        (0..rows).map(row).collect::<Vec<_>>().join(", ")
    }

    fn text(&mut self, v: impl Into<String>) {
        self.values.push(Value::Text(v.into()));
    }

    fn bind<'q>(self, sql: &'q str) -> Query<'q, sqlx::Any, AnyArguments> {
        self.values.into_iter().fold(sqlx::query(AssertSqlSafe(sql)), |q, v| match v {
            Value::Text(s) => q.bind(s),
            Value::Int(i) => q.bind(i),
        })
    }
}

/// Inserts `new` with its references, counters, links and creation event, within `tx`.
pub(super) async fn insert(tx: &mut sqlx::Transaction<'_, sqlx::Any>, new: &NewObject) -> Result<(), StoreError> {
    let r = &new.row;
    let mut st = Statement::default();
    let object = object_values(&mut st, new)?;
    st.parts.push(format!("o AS (INSERT INTO objects ({COLUMNS}) VALUES {object})"));
    if !new.refs.is_empty() {
        st.parts.push(format!("r AS (INSERT INTO refs (source, target, role) VALUES {})", st.rows(new.refs.len(), 3)));
        for (target, role) in &new.refs {
            st.text(r.id.as_str());
            st.text(&**target);
            st.text(&**role);
        }
    }
    let changes = usage::changes(&r.tenant, None, Some(r));
    if !changes.is_empty() {
        st.parts.push(format!("u AS ({})", usage::upsert_sql(changes.len(), st.next())));
        for (tenant, resource, by) in changes {
            st.text(tenant);
            st.text(resource);
            st.values.push(Value::Int(by));
        }
    }
    let targets = links::targets_of(r);
    if !targets.is_empty() {
        st.parts.push(format!("l AS (INSERT INTO links (source, target) VALUES {} ON CONFLICT DO NOTHING)", st.rows(targets.len(), 2)));
        for target in targets {
            st.text(r.id.as_str());
            st.text(target);
        }
    }
    let sql = format!("WITH {} {}", st.parts.join(", "), events::queue_sql(st.next()));
    let object = super::mem::api_json(r)?;
    let q = events::bind_event(st.bind(&sql), r, EventType::Created, object).bind(events::queue_id());
    let taken = || format!("a {} named {:?} already exists", r.kind.human(), r.name);
    q.execute(&mut **tx).await.map_err(|e| refused(e, taken, || missing(new)))?;
    Ok(())
}

/// The object's row of values (its deletion mark `NULL`), bound in `st`.
fn object_values(st: &mut Statement, new: &NewObject) -> Result<String, StoreError> {
    let r = &new.row;
    let first = st.next();
    for v in [r.id.as_str(), r.kind.as_str(), r.tenant.as_str(), r.name.as_str(), &*r.spec, &*r.status, r.state.as_str(), &*r.observed] {
        st.text(v);
    }
    st.values.push(Value::Int(r.observed_version));
    st.text(serde_json::to_string(&r.creators)?);
    st.values.push(Value::Int(r.version));
    st.text(ts(r.created_at));
    st.text(ts(r.updated_at));
    st.text(serde_json::to_string(&r.labels)?);
    let p = |i: usize| format!("${}", first + i);
    Ok(format!("({}, NULL, {})", (0..13).map(p).collect::<Vec<_>>().join(", "), p(13)))
}

/// What a reference that failed names: the one the object has, or each of them.
fn missing(new: &NewObject) -> String {
    let named: Vec<String> = new.refs.iter().map(|(target, role)| format!("{role} {target:?}")).collect();
    match named.as_slice() {
        [one] => format!("{one} does not exist"),
        _ => format!("one of {} does not exist", named.join(", ")),
    }
}
