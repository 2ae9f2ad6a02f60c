//! What every handler reaches: [`AppState`], one shared [`Services`], and
//! admission, which serialises the checks and the write of creates and
//! changes that take something.
//!
//! Admission: the checks a create or a change that takes something must
//! pass (quotas, host capacity, addresses, attachments, names) and the
//! write that stores it, made as one step, so that two requests never both
//! take the last of anything.
//!
//! [`AppState::admit`] serialises admissions through the store's gate
//! (`vmaas_store::Store::admission`): first within this process (a turn,
//! so one waits there rather than holding a database connection), then
//! across replicas on PostgreSQL (a transaction holding an advisory lock,
//! shared by this process's admissions queued together; see
//! [`crate::store::Admission`]). The state it hands back reads and writes
//! in that transaction, so what the checks saw and what the write stored
//! commit together, or not at all. On SQLite one process owns the
//! database and the turn alone decides.

use std::sync::Arc;

use vmaas_backend::Backend;

use crate::auth::{HasKeys, Keys};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::reconciler::Queue;
use crate::store::{self, Store};

/// What every handler can reach: one shared [`Services`], so that handing
/// it to a request (axum clones the state for every one) is one reference
/// count, not a copy of every field.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    /// Shares `services` among handlers.
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The services behind [`AppState`].
#[derive(Clone)]
pub struct Services {
    /// Durable state.
    pub store: Store,
    /// The console connections of this replica that hold an OSAC client id.
    pub console_clients: Arc<crate::app::consoles::clients::ConsoleClients>,
    /// Token keys.
    pub keys: Keys,
    /// The reconciler's queue: a change enqueues the object it changed.
    pub queue: Arc<Queue>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// How far VMs may overcommit the host.
    pub overcommit: crate::capacity::Overcommit,
    /// How far the reconciler has caught up since start.
    pub progress: Arc<crate::reconciler::Progress>,
    /// The external IP pools.
    pub pools: Arc<crate::pools::Pools>,
    /// The largest image file imported or uploaded.
    pub image_max_bytes: u64,
    /// Image imports from a URL one tenant may have under way at once.
    pub image_imports_per_tenant: usize,
    /// The disk exports under way, per tenant.
    pub exports: Arc<crate::export_slots::ExportSlots>,
    /// The event streams open.
    pub watches: Arc<crate::watches::Watches>,
    /// The request rate each tenant may use; none: unlimited.
    pub rate: Option<Arc<crate::rate::TenantRate>>,
    /// Committed events, for watchers.
    pub events: Arc<crate::events::EventHub>,
    /// Where mutating requests are recorded, if anywhere.
    pub audit: Option<crate::audit::AuditLog>,
    /// The backend's image catalog as last read.
    pub catalog: crate::app::catalog::CatalogCache,
}

impl HasKeys for AppState {
    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn rate(&self) -> Option<&crate::rate::TenantRate> {
        self.rate.as_deref()
    }
}

/// An admission under way: check and write through [`Admitted::state`],
/// then [`Admitted::commit`]. Dropped without a commit, its writes are undone
/// (PostgreSQL) and the next admission goes ahead.
#[must_use = "an admission must be committed for its writes to stay"]
pub struct Admitted {
    state: AppState,
    tx: store::Admission,
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
    /// replicas' admissions under way (on PostgreSQL, this process's
    /// admissions queued together share one transaction: see
    /// [`store::Admission`]).
    pub async fn admit(&self) -> Result<Admitted, ApiError> {
        let tx = self.store.admission().await?;
        let state = match tx.is_transaction() {
            true => AppState::new(Services { store: tx.store().clone(), ..Services::clone(self) }),
            // SQLite: the store itself, so the state as it is.
            false => self.clone(),
        };
        Ok(Admitted { state, tx })
    }
}
