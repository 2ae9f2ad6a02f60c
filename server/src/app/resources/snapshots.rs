//! `compute_instance_snapshots`: every disk of one of the caller's VMs at
//! one instant, taken while it runs or while it is stopped. It counts
//! against the tenant's disk quota once taken. Deleting it is refused
//! (409 naming the VM) while a restore from it is under way.

use axum::http::StatusCode;
use tracing::info;
use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotState, ComputeInstanceSnapshotStatus, ObjectKind, ValidationErrors};

use crate::app::kind::Kind;
use crate::app::scope::{owned_by, scope};
use crate::app::simple;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{Scope, SnapshotRecord};

const VM_FIELD: &str = "object.spec.compute_instance";

impl Kind for ComputeInstanceSnapshot {
    type Patch = simple::Relabel;

    fn check_spec(spec: &vmaas_model::ComputeInstanceSnapshotSpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: SnapshotRecord) -> Result<SnapshotRecord, ApiError> {
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let vm = simple::row(&s, &owned_by(&caller.tenant), ObjectKind::VirtualMachine, &rec.spec.compute_instance, VM_FIELD).await?;
        crate::quota::require_disk_left(&s.store, &caller.tenant, "a snapshot").await?;
        rec.spec.compute_instance = vm.id.clone();
        rec.status = ComputeInstanceSnapshotStatus { message: Some("waiting to be taken".into()), ..Default::default() };
        s.store.insert_record(&rec, Vec::new()).await?;
        adm.commit().await?;
        s.queue.enqueue(ObjectKind::ComputeInstanceSnapshot, &rec.id);
        info!(snapshot = %rec.id, name = %rec.name, vm = %vm.id, tenant = %rec.tenant, "snapshot requested");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: simple::Relabel) -> Result<SnapshotRecord, ApiError> {
        simple::relabel::<Self>(s, caller, id, p).await
    }

    async fn remove(s: &AppState, caller: &Caller, id: &str) -> Result<SnapshotRecord, ApiError> {
        // Under the admission lock: no restore from it is asked for between the check and the mark.
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let snapshot = s.store.get_record::<ComputeInstanceSnapshot>(id, &scope(caller)).await?;
        if let Ok(vm) = s.store.get_vm(&snapshot.spec.compute_instance, &Scope::All).await
            && vm.restore_pending() == Some(snapshot.id.as_str())
        {
            let message = format!(
                "snapshot {:?} is being restored onto virtual machine {:?} ({}); wait for it to finish",
                snapshot.name, vm.name, vm.id
            );
            return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
        }
        for vm in s.store.linked_to(ObjectKind::VirtualMachine, &snapshot.id).await? {
            let vm = crate::store::VmRecord::from_row(&vm)?;
            if vm.deleted_at.is_none() && !settled(vm.status.state) {
                let message = format!(
                    "snapshot {:?} is being copied into virtual machine {:?} ({}), a clone of it; wait until it has started",
                    snapshot.name, vm.name, vm.id
                );
                return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
            }
        }
        let out = simple::remove::<Self>(&s, caller, id).await?;
        adm.commit().await?;
        Ok(out)
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::snapshot::reconcile(r, id))
    }
}

/// Why a snapshot cannot be restored or cloned from.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnapshotRefused {
    /// The caller has no snapshot of that id or name.
    #[error("you have no snapshot {0:?}")]
    Unknown(String),
    /// It is being deleted.
    #[error("snapshot {0:?} is being deleted")]
    Deleting(String),
    /// It is not READY.
    #[error("snapshot {name:?} is {state}, not READY")]
    NotReady { name: String, state: ComputeInstanceSnapshotState },
    /// It is of another virtual machine than the one restored.
    #[error("snapshot {snapshot:?} is of another virtual machine, not {vm:?}")]
    OfAnother { snapshot: String, vm: String },
}

impl From<SnapshotRefused> for String {
    fn from(e: SnapshotRefused) -> Self {
        e.to_string()
    }
}

/// The tenant's snapshot `reference` (an id or a name) names; else why
/// not, for a 400 naming the caller's field.
pub(crate) async fn named(s: &AppState, tenant: &str, reference: &str) -> Result<Result<SnapshotRecord, SnapshotRefused>, ApiError> {
    let reference = reference.trim();
    Ok(s.store
        .find_record::<ComputeInstanceSnapshot>(reference, &owned_by(tenant))
        .await?
        .ok_or_else(|| SnapshotRefused::Unknown(reference.to_owned())))
}

/// Whether `snap` can be restored or cloned from: READY and not being
/// deleted; else why not.
pub(crate) fn usable(snap: &SnapshotRecord) -> Result<(), SnapshotRefused> {
    if snap.deleted_at.is_some() {
        return Err(SnapshotRefused::Deleting(snap.name.clone()));
    }
    if snap.status.state != ComputeInstanceSnapshotState::Ready {
        return Err(SnapshotRefused::NotReady { name: snap.name.clone(), state: snap.status.state });
    }
    Ok(())
}

/// Whether a clone in `state` has made its disks (or given up): READY,
/// STOPPED or FAILED; a clone still starting may be copying them.
fn settled(state: vmaas_model::VmState) -> bool {
    matches!(state, vmaas_model::VmState::Ready | vmaas_model::VmState::Stopped | vmaas_model::VmState::Failed)
}
