//! Admission: the checks a create or a change that takes something must
//! pass (quotas, host capacity, addresses, attachments, names) and the
//! write that stores it, made as one step, so that two requests never both
//! take the last of anything.
//!
//! [`AppState::admit`] serialises admissions: first within this process
//! (a mutex, so one waits here rather than holding a database connection),
//! then across replicas on PostgreSQL (a transaction holding an advisory
//! lock; see [`crate::store::Admission`]). The state it hands back reads
//! and writes in that transaction, so what the checks saw and what the
//! write stored commit together, or not at all. On SQLite one process owns
//! the database and the mutex alone decides.

use std::sync::Arc;

use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::api::{AppState, Services};
use crate::error::ApiError;
use crate::store;

/// The in-process half of admission: one admission at a time per process.
#[derive(Clone, Default)]
pub struct Gate(Arc<Mutex<()>>);

/// An admission under way: check and write through [`Admitted::state`],
/// then [`Admitted::commit`]. Dropped without a commit, its writes are undone
/// (PostgreSQL) and the next admission goes ahead.
#[must_use = "an admission must be committed for its writes to stay"]
pub struct Admitted {
    state: AppState,
    tx: store::Admission,
    _local: OwnedMutexGuard<()>,
}

impl Admitted {
    /// The application state whose store is the admission's.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Commits the admission's writes and lets the next admission go ahead.
    pub async fn commit(self) -> Result<(), ApiError> {
        self.tx.commit().await?;
        Ok(())
    }
}

impl AppState {
    /// Begins an admission: waits for this process's and then the other
    /// replicas' admissions under way.
    pub async fn admit(&self) -> Result<Admitted, ApiError> {
        let local = self.admission.0.clone().lock_owned().await;
        let tx = self.store.admission().await?;
        let state = match tx.is_transaction() {
            true => AppState::new(crate::api::Services { store: tx.store().clone(), ..Services::clone(self) }),
            // SQLite: the store itself, so the state as it is.
            false => self.clone(),
        };
        Ok(Admitted { state, tx, _local: local })
    }
}
