//! A create on PostgreSQL in one statement: the object, its references,
//! the counters it moves, its links and its event, as the parts of one
//! `WITH`. Inside an admission, which holds the lock every replica's
//! admissions wait on, it is one round trip where it was five. The
//! references are checked at the end of the statement, so they find the
//! object made in it; a name taken or a reference missing fails the
//! statement, and nothing of it stays.

use super::db_errors::refused;
use super::events::{self, EventType};
use super::row::{COLUMNS, NewObject};
use super::statement::Statement;
use super::{StoreError, links, usage};

/// Inserts `new` with its references, counters, links and creation event, within `tx`.
pub(super) async fn insert(tx: &mut sqlx::Transaction<'_, sqlx::Any>, new: &NewObject) -> Result<(), StoreError> {
    let r = &new.row;
    let mut st = Statement::default();
    let object = new.bind_values(&mut st)?;
    st.parts.push(format!("o AS (INSERT INTO objects ({COLUMNS}) VALUES {object})"));
    if !new.refs.is_empty() {
        let refs = new.bind_refs(&mut st);
        st.parts.push(format!("r AS (INSERT INTO refs (source, target, role) VALUES {refs})"));
    }
    let changes = usage::changes(&r.tenant, None, Some(r));
    if !changes.is_empty() {
        st.parts.push(format!("u AS ({})", usage::upsert_sql(changes.len(), st.next())));
        for (tenant, resource, by) in changes {
            st.text(tenant);
            st.text(resource);
            st.int(by);
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

/// What a reference that failed names: the one the object has, or each of them.
pub(super) fn missing(new: &NewObject) -> String {
    let named: Vec<String> = new.refs.iter().map(|(target, role)| format!("{role} {target:?}")).collect();
    match named.as_slice() {
        [one] => format!("{one} does not exist"),
        _ => format!("one of {} does not exist", named.join(", ")),
    }
}
