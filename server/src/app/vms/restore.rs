//! Restoring a VM from one of its snapshots: its disks go back to what
//! the snapshot holds (a running VM only when asked to stop for it).

use tracing::info;
use vmaas_model::{PowerState, RestoreRequest};

use crate::app::resources::snapshots;
use crate::app::scope::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{SnapshotRecord, VmRecord};

/// The snapshot `reference` names, if it is a READY snapshot of `vm`; else a 400 naming `snapshot`.
async fn snapshot_of(s: &AppState, vm: &VmRecord, reference: &str) -> Result<SnapshotRecord, ApiError> {
    let refused = |why: snapshots::SnapshotRefused| ApiError::field("snapshot", why);
    let snap = snapshots::named(s, &vm.tenant, reference).await?.map_err(refused)?;
    if snap.spec.compute_instance != vm.id {
        return Err(refused(snapshots::SnapshotRefused::OfAnother { snapshot: snap.name, vm: vm.name.clone() }));
    }
    snapshots::usable(&snap).map_err(refused)?;
    Ok(snap)
}

/// Restores the VM `id` from the snapshot `req` names.
pub(crate) async fn restore(s: &AppState, caller: &Caller, id: &str, req: RestoreRequest) -> Result<VmRecord, ApiError> {
    req.check().map_err(ApiError::invalid)?;
    if !s.backend.capabilities().restores {
        return Err(ApiError::precondition(format!("the {} backend does not restore VMs from snapshots", s.backend.name())));
    }
    // Under the admission lock: the snapshot is not deleted between the check and the request.
    let adm = s.admit().await?;
    let st = adm.state().clone();
    let vm = st.store.get_vm(id, &scope(caller)).await?;
    if vm.deleted_at.is_some() {
        return Err(ApiError::precondition(format!("virtual machine {:?} is being deleted", vm.name)));
    }
    let snap = snapshot_of(&st, &vm, &req.snapshot).await?;
    if vm.power().holds_host() && !req.stop {
        let (now, after) = match vm.power() {
            PowerState::Paused => ("paused", " (it comes back started: its frozen memory does not survive a restore)"),
            _ => ("running", ""),
        };
        return Err(ApiError::precondition(format!(
            "virtual machine {:?} is {now}: stop it first, or send \"stop\": true to have it stopped for the restore{after}",
            vm.name
        )));
    }
    let requested = st.store.request_restore(&vm.id, &scope(caller), &snap.id).await?;
    adm.commit().await?;
    info!(vm = %vm.id, snapshot = %snap.id, by = %caller.subject, "restore from a snapshot requested");
    super::settle(s, &requested).await
}
