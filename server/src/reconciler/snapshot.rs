//! Reconciling snapshots: taken once through the backend's snapshot
//! driver (the VM's disks and the volumes on it now), then left alone
//! until deleted; removed through the driver. A VM's deletion takes its
//! snapshots with it unless it was asked to keep them ([`with_vm`]).

use std::time::Duration;

use chrono::Utc;
use tracing::{info, warn};
use vmaas_backend::{Cleanup, SnapshotObservation, SnapshotSpec, Target};
use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotState as State, ComputeInstanceSnapshotStatus as Status, ObjectKind};

use super::status::{get, write};
use super::{Outcome, Pass, Reconciler};
use crate::store::{Scope, SnapshotRecord, StoreError, VmRecord};

/// How soon a snapshot whose removal failed is looked at again.
const RETRY: Duration = Duration::from_secs(1);

fn failed(message: impl Into<String>) -> Status {
    Status { state: State::Failed, message: Some(message.into()), ..Default::default() }
}

/// One pass over snapshot `id`.
pub(crate) async fn reconcile(r: &Reconciler, id: &str) -> Pass {
    let Some(snap) = get::<ComputeInstanceSnapshot>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    if snap.deleted_at.is_some() {
        return remove(r, &snap).await;
    }
    if matches!(snap.status.state, State::Ready | State::Failed) {
        return Ok((write(r, &snap, snap.status.clone()).await?, None));
    }
    let Some(driver) = r.backend.snapshots() else {
        return Ok((write(r, &snap, failed(format!("the {} backend does not take snapshots", r.backend.name()))).await?, None));
    };
    let vm = match r.store.get_vm(&snap.spec.compute_instance, &Scope::All).await {
        Ok(vm) if vm.deleted_at.is_none() => vm,
        Ok(_) | Err(StoreError::NotFound { .. }) => {
            return Ok((write(r, &snap, failed("its virtual machine was deleted before it was taken")).await?, None));
        }
        Err(e) => return Err(e),
    };
    let spec = SnapshotSpec { vm: vm.id.clone(), disks: vm.machine.disks.clone(), volumes: super::volume::disks(r, &vm).await? };
    let target = Target { id: snap.id.clone(), tenant: snap.tenant.clone(), name: snap.name.clone(), version: snap.version, spec };
    let (status, next) = match driver.ensure(&target).await {
        Ok((SnapshotObservation::Ready(t), next)) => {
            let status = Status {
                state: State::Ready,
                online: t.online,
                consistency: Some(t.consistency),
                size_bytes: t.size_bytes(),
                disks: t.disks,
                taken_at: Some(t.taken_at),
                template: Some(vm.spec.template.clone()),
                template_parameters: vm.spec.template_parameters.clone(),
                message: None,
            };
            (status, next.delay())
        }
        Ok((SnapshotObservation::Pending(m), next)) => (Status { message: Some(m), ..Default::default() }, next.delay()),
        Ok((SnapshotObservation::Failed(m), _)) => (failed(m), None),
        Err(e) if e.kind == vmaas_backend::ErrorKind::Transient => {
            warn!(snapshot = %snap.id, error = %e, "taking a snapshot failed; will retry");
            (Status { message: Some(e.to_string()), ..Default::default() }, Some(RETRY))
        }
        Err(e) => (failed(e.to_string()), None),
    };
    if status.state == State::Ready && snap.status.state != State::Ready {
        info!(snapshot = %snap.id, vm = %vm.id, bytes = status.size_bytes, online = status.online, "snapshot ready");
    }
    Ok((write(r, &snap, status).await?, next))
}

/// A deleted snapshot: its files removed, then its record.
async fn remove(r: &Reconciler, snap: &SnapshotRecord) -> Pass {
    if let Some(driver) = r.backend.snapshots() {
        match driver.delete(&snap.id).await {
            Ok(Cleanup::Done) => {}
            Ok(Cleanup::InProgress) => return Ok((Outcome::Unchanged, Some(RETRY))),
            Err(e) => {
                warn!(snapshot = %snap.id, error = %e, "removing a snapshot failed; will retry");
                let status = Status { state: State::Deleting, message: Some(e.to_string()), ..snap.status.clone() };
                write(r, snap, status).await?;
                return Ok((Outcome::BackendError, Some(RETRY)));
            }
        }
    }
    r.store.remove(&snap.id).await?;
    info!(snapshot = %snap.id, name = %snap.name, "snapshot removed");
    Ok((Outcome::Removed, None))
}

/// Deletes the snapshots of VM `vm`, which is gone, unless its deletion
/// asked to keep them.
pub(super) async fn with_vm(r: &Reconciler, vm: &VmRecord) -> Result<(), StoreError> {
    if vm.retain_snapshots {
        return Ok(());
    }
    for s in r.store.linked_records::<ComputeInstanceSnapshot>(&vm.id).await? {
        match r.store.mark_record_deleted::<ComputeInstanceSnapshot>(&s.id, &Scope::All, Utc::now()).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        r.queue.enqueue(ObjectKind::ComputeInstanceSnapshot, &s.id);
        info!(snapshot = %s.id, vm = %vm.id, "snapshot deleted with its virtual machine");
    }
    Ok(())
}
