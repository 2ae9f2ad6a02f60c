//! A create on SQLite in one query: the object, its references and its
//! event, statements sent together, so that the database's thread is
//! handed the work once instead of once a statement (each hand-off is
//! two thread switches). A name taken or a reference missing fails the
//! query, and the transaction it runs in keeps none of it: the commit
//! that holds it is dropped, and its requests are tried again one by one.

use sqlx::Row as _;

use super::StoreError;
use super::create_pg::missing;
use super::events::{self, EventType};
use super::row::{COLUMNS, NewObject, refused};
use super::statement::Statement;

/// Inserts `new` with its references and its creation event, within `tx`.
pub(super) async fn insert(tx: &mut sqlx::Transaction<'_, sqlx::Any>, new: &NewObject) -> Result<(), StoreError> {
    let r = &new.row;
    let mut st = Statement::default();
    let object = new.bind_values(&mut st)?;
    let mut sql = format!("INSERT INTO objects ({COLUMNS}) VALUES {object}; ");
    if !new.refs.is_empty() {
        sql.push_str(&format!("INSERT INTO refs (source, target, role) VALUES {}; ", st.rows(new.refs.len(), 3)));
        for (target, role) in &new.refs {
            st.text(r.id.as_str());
            st.text(&**target);
            st.text(&**role);
        }
    }
    sql.push_str(&events::record_sql(st.next()));
    let object = super::mem::api_json(r)?;
    let q = events::bind_event(st.bind(&sql), r, EventType::Created, object);
    let taken = || format!("a {} named {:?} already exists", r.kind.human(), r.name);
    let rows = q.fetch_all(&mut **tx).await.map_err(|e| refused(e, taken, || missing(new)))?;
    let seq = rows.last().ok_or(StoreError::Database(sqlx::Error::RowNotFound))?.try_get("seq")?;
    events::trim(tx, seq).await
}
