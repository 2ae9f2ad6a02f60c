//! `vmaas-server gc`: the resources on the host that belong to no stored
//! object, listed (`--dry-run`) or removed. The server itself only ever
//! quarantines them.

use vmaas_backend::{Backend, BackendError, Quarantined};
use vmaas_model::ObjectKind;

use crate::store::{Store, StoreError};

/// Why collecting failed.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The backend failed to list or remove something.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// The resources on the host no object in `store` owns; removed unless `dry_run`.
pub async fn collect(store: &Store, backend: &dyn Backend, dry_run: bool) -> Result<Vec<Quarantined>, GcError> {
    let ids: Vec<String> = store.all(ObjectKind::VirtualMachine).await?.into_iter().map(|r| r.id).collect();
    let vms = backend.vms();
    vms.retain(&ids).await?;
    let found = backend.quarantine();
    if !dry_run {
        for q in &found {
            vms.delete(&q.id).await?;
            tracing::warn!(vm = %q.id, name = ?q.name, tenant = ?q.tenant, "gc: removed a VM the store does not know");
        }
    }
    Ok(found)
}
