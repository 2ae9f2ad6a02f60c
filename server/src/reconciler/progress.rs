//! How far the reconciler is since this server started, for `/healthz`:
//! whether it leads, and whether every object it found when it took the
//! lease has been reconciled once (a restarted server has caught up).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::Serialize;

use super::Key;

/// Shared between the reconciler and the API.
#[derive(Debug, Default)]
pub struct Progress {
    leader: AtomicBool,
    /// How many objects are reconciled at once.
    workers: AtomicUsize,
    /// Objects of the first full sweep not reconciled yet; `None` before it.
    first: Mutex<Option<HashSet<Key>>>,
}

/// What `/healthz` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgressReport {
    /// Whether this replica holds the lease.
    pub leader: bool,
    /// Whether every object known when the lease was taken has been reconciled once.
    pub synced: bool,
    /// How many of those are still to do.
    pub pending: usize,
    /// How many objects are reconciled at once (`--reconcile-workers`).
    pub workers: usize,
}

impl Progress {
    pub(super) fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::SeqCst);
    }

    pub(super) fn set_workers(&self, workers: usize) {
        self.workers.store(workers, Ordering::SeqCst);
    }

    fn first(&self) -> std::sync::MutexGuard<'_, Option<HashSet<Key>>> {
        self.first.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the objects of the first full sweep, once.
    pub(super) fn first_sweep(&self, keys: impl IntoIterator<Item = Key>) {
        let mut first = self.first();
        if first.is_none() {
            *first = Some(keys.into_iter().collect());
        }
    }

    /// Records that `key` was reconciled.
    pub(super) fn reconciled(&self, key: &Key) {
        if let Some(set) = self.first().as_mut() {
            set.remove(key);
        }
    }

    /// Whether this replica holds the reconciler's lease.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    /// The report for `/healthz`.
    pub fn report(&self) -> ProgressReport {
        let first = self.first();
        let pending = first.as_ref().map(HashSet::len).unwrap_or(0);
        ProgressReport {
            leader: self.leader.load(Ordering::SeqCst),
            synced: first.is_some() && pending == 0,
            pending,
            workers: self.workers.load(Ordering::SeqCst),
        }
    }
}
