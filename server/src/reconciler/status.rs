//! What every kind's reconcile does with its record: read it (gone is no
//! error), and write the status it derived, only when it changed.

use vmaas_model::Object;

use super::{Outcome, Reconciler};
use crate::store::record::Record;
use crate::store::{Scope, StoreError};

/// The object `id` of kind `K`, or `None` once it is gone.
pub(super) async fn get<K: Object>(r: &Reconciler, id: &str) -> Result<Option<Record<K>>, StoreError> {
    match r.store.get_record::<K>(id, &Scope::All).await {
        Ok(rec) => Ok(Some(rec)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `s` as the status of `rec` unless it is what the record holds
/// (and acknowledged); wakes the status watchers when it wrote.
pub(super) async fn write<K: Object>(r: &Reconciler, rec: &Record<K>, s: K::Status) -> Result<Outcome, StoreError> {
    if s == rec.status && !rec.unacknowledged() {
        return Ok(Outcome::Unchanged);
    }
    if !r.store.write_record_status(rec, &s).await? {
        return Ok(Outcome::Unchanged);
    }
    r.queue.status_written();
    Ok(Outcome::Updated)
}
