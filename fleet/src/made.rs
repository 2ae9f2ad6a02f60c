//! Where the objects of one kind are made: the clusters the fleet made each
//! on, or found holding it (after a restart, the clusters' own caches).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use vmaas_backend::{BackendError, Cleanup, Driver};
use vmaas_model::ObjectKind;

use crate::Inner;

/// The clusters each object of one kind is made on, by object id.
pub(crate) struct MadeOn {
    kind: ObjectKind,
    on: Mutex<HashMap<String, BTreeSet<usize>>>,
}

impl MadeOn {
    /// Nothing known yet of objects of `kind`.
    pub(crate) fn new(kind: ObjectKind) -> Self {
        Self { kind, on: Mutex::default() }
    }

    /// The clusters object `id` is made on: as remembered, and those that
    /// hold it.
    pub(crate) fn of(&self, inner: &Inner, id: &str) -> BTreeSet<usize> {
        let mut on = self.on.lock().map(|o| o.get(id).cloned().unwrap_or_default()).unwrap_or_default();
        on.extend(inner.holders(self.kind, id));
        on
    }

    /// The clusters object `id` is to be deleted from: those it is made
    /// on, and those not listed yet (which may hold it unseen; their
    /// drivers refuse until they are).
    pub(crate) fn to_delete(&self, inner: &Inner, id: &str) -> BTreeSet<usize> {
        let mut on = self.of(inner, id);
        on.extend((0..inner.members.len()).filter(|&m| !inner.members[m].backend.listed()));
        on
    }

    /// Whether object `id` is made on cluster `m`: as remembered (without
    /// a look through the cluster's cache), else as the cluster holds it.
    pub(crate) fn has(&self, inner: &Inner, id: &str, m: usize) -> bool {
        let remembered = self.on.lock().is_ok_and(|on| on.get(id).is_some_and(|c| c.contains(&m)));
        if !remembered && inner.members[m].backend.holds(self.kind, id) {
            self.mark(id, m);
            return true;
        }
        remembered
    }

    /// Remembers object `id` made on cluster `m`.
    pub(crate) fn mark(&self, id: &str, m: usize) {
        if let Ok(mut on) = self.on.lock() {
            on.entry(id.to_owned()).or_default().insert(m);
        }
    }

    /// Remembers object `id` made on exactly `clusters`.
    pub(crate) fn set(&self, id: &str, clusters: BTreeSet<usize>) {
        if let Ok(mut on) = self.on.lock() {
            on.insert(id.to_owned(), clusters);
        }
    }

    /// Deletes object `id` through `drivers` from every cluster it may be
    /// on ([`Self::to_delete`]), and forgets it once it is gone from all.
    pub(crate) async fn delete<S: Sync, O: Send>(
        &self,
        inner: &Inner,
        drivers: &[Arc<dyn Driver<S, O>>],
        id: &str,
    ) -> Result<Cleanup, BackendError> {
        let done = crate::fanout::delete_on(drivers, self.to_delete(inner, id), id).await?;
        if done == Cleanup::Done {
            self.forget(id);
        }
        Ok(done)
    }

    /// Forgets object `id`.
    pub(crate) fn forget(&self, id: &str) {
        if let Ok(mut on) = self.on.lock() {
            on.remove(id);
        }
    }
}
