//! `POST /virtual_machines/{id}/restore`: a VM's disks go back to one of
//! its snapshots. A running VM is refused (409) unless the request says
//! `"stop": true`; then it is stopped for the restore and runs again once
//! its disks are back (PROGRESSING, reason `Restoring`, then READY).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Json, Router};
use tracing::info;
use vmaas_model::{Envelope, PowerState, RestoreRequest, VirtualMachine};

use super::resources::snapshots;
use super::shared::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{SnapshotRecord, VmRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_machines/{id}/restore", axum::routing::post(restore))
}

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

/// Restore a virtual machine's disks from one of its snapshots.
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines/{id}/restore", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    request_body(content = RestoreRequest, description = "The snapshot, and whether a running VM may be stopped for it"),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Restore requested"),
        (status = 400, body = ApiError, description = "No such READY snapshot of this VM"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "Running without `stop`, being deleted, or the backend has no snapshots")),
    security(("bearer" = [])))]
pub(super) async fn restore(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let req: RestoreRequest = super::extract::decode(&body)?;
    req.check().map_err(ApiError::invalid)?;
    if !s.backend.capabilities().restores {
        return Err(ApiError::precondition(format!("the {} backend does not restore VMs from snapshots", s.backend.name())));
    }
    // Under the admission lock: the snapshot is not deleted between the check and the request.
    let adm = s.admit().await?;
    let st = adm.state().clone();
    let vm = st.store.get_vm(&id, &scope(&caller)).await?;
    if vm.deleted_at.is_some() {
        return Err(ApiError::precondition(format!("virtual machine {:?} is being deleted", vm.name)));
    }
    let snap = snapshot_of(&st, &vm, &req.snapshot).await?;
    if vm.power() == PowerState::Started && !req.stop {
        return Err(ApiError::precondition(format!(
            "virtual machine {:?} is running: stop it first, or send \"stop\": true to have it stopped for the restore",
            vm.name
        )));
    }
    let requested = st.store.request_restore(&vm.id, &scope(&caller), &snap.id).await?;
    adm.commit().await?;
    info!(vm = %vm.id, snapshot = %snap.id, by = %caller.subject, "restore from a snapshot requested");
    let rec = super::vms::settle(&s, &requested).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
