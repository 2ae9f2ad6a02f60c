//! The commit's writes on SQLite, each one query: a create (the object,
//! its references and its event) and a status write (the row and its
//! event), their statements sent together, so that the database's thread
//! is handed each once instead of once a statement (a hand-off is two
//! thread switches). A create whose name is taken or whose reference is
//! missing fails the query, and the transaction it runs in keeps none of
//! it: the commit that holds it is dropped, and its requests are tried
//! again one by one.

use sqlx::Row as _;

use super::StoreError;
use super::create_pg::missing;
use super::db_errors::refused;
use super::events::{self, EventType};
use super::row::{COLUMNS, NewObject, StatusWrite};
use super::statement::Statement;

/// Inserts `new` with its references and its creation event, within `tx`.
pub(super) async fn insert(tx: &mut sqlx::Transaction<'_, sqlx::Any>, new: &NewObject) -> Result<(), StoreError> {
    let r = &new.row;
    let mut st = Statement::default();
    let object = new.bind_values(&mut st)?;
    let mut sql = format!("INSERT INTO objects ({COLUMNS}) VALUES {object}; ");
    if !new.refs.is_empty() {
        sql.push_str(&format!("INSERT INTO refs (source, target, role) VALUES {}; ", new.bind_refs(&mut st)));
    }
    sql.push_str(&events::record_sql(st.next()));
    let object = super::mem::api_json(r)?;
    let q = events::bind_event(st.bind(&sql), r, EventType::Created, object);
    let taken = || format!("a {} named {:?} already exists", r.kind.human(), r.name);
    let rows = q.fetch_all(&mut **tx).await.map_err(|e| refused(e, taken, || missing(new)))?;
    let seq = rows.last().ok_or(StoreError::Database(sqlx::Error::RowNotFound))?.try_get("seq")?;
    events::trim(tx, seq).await
}

/// Writes `w`'s status on its row within `tx` unless the row's version
/// moved on, with the event of the change when the status changed: whether
/// it was written.
pub(super) async fn write_status(tx: &mut sqlx::Transaction<'_, sqlx::Any>, w: &StatusWrite) -> Result<bool, StoreError> {
    if !w.changes_status() {
        return w.apply(tx).await;
    }
    let changed = w.written();
    let sql = format!("{}; {}", StatusWrite::UPDATE, events::record_if_written_sql(6));
    let q = w.bind(sqlx::query(sqlx::AssertSqlSafe(sql)));
    let q = events::bind_event(q, &changed, EventType::Updated, super::mem::api_json(&changed)?);
    // Every statement's rows (`fetch_optional` would stop at the update's result).
    let Some(row) = q.fetch_all(&mut **tx).await?.pop() else { return Ok(false) };
    events::trim(tx, row.try_get("seq")?).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's seq is read from the end of the events' index, never by
    /// reading every event kept: with a `HAVING` SQLite read them all, and
    /// each status write of the reconciler took 6 ms at 100 000 events.
    #[tokio::test]
    async fn an_event_is_numbered_without_reading_the_events_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open_sqlite(dir.path()).await.unwrap();
        for sql in [events::record_sql(1), events::record_if_written_sql(1)] {
            let explain = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
            let rows = (0..6).fold(explain, |q, _| q.bind("x")).fetch_all(&store.pool).await.unwrap();
            let plan: Vec<String> = rows.iter().map(|r| r.try_get("detail").unwrap()).collect();
            assert!(plan.iter().any(|step| step.starts_with("SEARCH events")), "{sql}: {plan:?}");
            assert!(!plan.iter().any(|step| step.starts_with("SCAN events")), "{sql}: {plan:?}");
        }
    }
}
