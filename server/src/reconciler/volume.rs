//! Reconciling volumes and volume attachments.
//!
//! A volume's disk is made and removed by the backend's volume driver. An
//! attachment is carried out by its VM: the VM's reconcile lists the
//! volumes of its live attachments in the VM driver's spec ([`disks`]),
//! and the driver reports where each one is; the reconciler keeps that
//! report per VM ([`Seen`]) and wakes the VM's attachments when it
//! changes, whose status follows from it. A deleted attachment is removed
//! once its VM no longer has the volume (the guest released it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::Utc;
use tracing::{info, warn};
use vmaas_backend::{Cleanup, DiskPresence, Target, VolumeDisk, VolumeObservation, VolumePresence, VolumeSpec};
use vmaas_model::volume::disk_serial;
use vmaas_model::{ObjectKind, Volume, VolumeAttachment, VolumeAttachmentState, VolumeAttachmentStatus, VolumeState, VolumeStatus};

use super::status::{get, write};
use super::{Outcome, Pass, Reconciler};
use crate::store::{Scope, StoreError, VmRecord, VolumeAttachmentRecord, VolumeRecord};

/// How soon an object waiting on another is looked at again.
const WAIT: Duration = Duration::from_millis(500);

/// Where each VM's volumes were at its last reconcile, by VM id.
#[derive(Debug, Default)]
pub(crate) struct Seen(Mutex<HashMap<String, VolumePresence>>);

impl Seen {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VolumePresence>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records what VM `vm` reported; true when it changed.
    pub(crate) fn note(&self, vm: &str, presence: VolumePresence) -> bool {
        self.lock().insert(vm.to_owned(), presence.clone()).as_ref() != Some(&presence)
    }

    /// Where volume `volume` is on VM `vm`, as last reported.
    fn of(&self, vm: &str, volume: &str) -> Option<Option<DiskPresence>> {
        self.lock().get(vm).map(|p| p.get(volume).cloned())
    }

    /// Forgets VM `vm`.
    pub(crate) fn forget(&self, vm: &str) {
        self.lock().remove(vm);
    }
}

/// The attachments on VM `vm` (being deleted or not).
async fn attachments_of(r: &Reconciler, vm: &str) -> Result<Vec<VolumeAttachmentRecord>, StoreError> {
    r.store.linked_records::<VolumeAttachment>(vm).await
}

/// The volumes VM `vm` should have: those of its live attachments whose disk is made.
pub(super) async fn disks(r: &Reconciler, vm: &VmRecord) -> Result<Vec<VolumeDisk>, StoreError> {
    let mut out = Vec::new();
    for a in attachments_of(r, &vm.id).await?.into_iter().filter(|a| a.deleted_at.is_none()) {
        let Some(v) = get::<Volume>(r, &a.spec.volume).await? else { continue };
        if matches!(v.status.state, VolumeState::Ready | VolumeState::Attached) {
            out.push(VolumeDisk { volume: v.id.clone(), serial: disk_serial(&v.id), size_bytes: v.spec.size.to_units_ceil().unwrap_or(0) });
        }
    }
    Ok(out)
}

/// Keeps what VM `vm` reported of its volumes, waking its attachments when it changed.
pub(super) async fn note_presence(r: &Reconciler, vm: &str, presence: VolumePresence) -> Result<(), StoreError> {
    if r.volumes_seen.note(vm, presence) {
        for a in attachments_of(r, vm).await? {
            r.queue.enqueue(ObjectKind::VolumeAttachment, &a.id);
        }
    }
    Ok(())
}

/// Detaches every volume of VM `vm`, which is gone: its attachments are
/// removed, and the volumes of those that say `auto_delete` are deleted.
pub(super) async fn detach_all(r: &Reconciler, vm: &str) -> Result<(), StoreError> {
    r.volumes_seen.forget(vm);
    for a in attachments_of(r, vm).await? {
        r.store.mark_record_deleted::<VolumeAttachment>(&a.id, &Scope::All, Utc::now()).await?;
        r.store.remove(&a.id).await?;
        if a.spec.auto_delete {
            match r.store.mark_record_deleted::<Volume>(&a.spec.volume, &Scope::All, Utc::now()).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        r.queue.enqueue(ObjectKind::Volume, &a.spec.volume);
        info!(attachment = %a.id, volume = %a.spec.volume, auto_delete = a.spec.auto_delete, "volume detached from a deleted VM");
    }
    Ok(())
}

/// A volume: its disk through the driver; ATTACHED while an attachment holds it.
pub(crate) async fn reconcile_volume(r: &Reconciler, id: &str) -> Pass {
    let Some(v) = get::<Volume>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    let holder = r.store.volume_holder(&v.id).await?;
    if v.deleted_at.is_some() {
        return remove_volume(r, &v, holder.is_some()).await;
    }
    if let Some(h) = holder.as_ref().filter(|_| v.unacknowledged()) {
        r.queue.enqueue(ObjectKind::VirtualMachine, &h.spec.compute_instance);
    }
    let attached_to = holder.as_ref().map(|h| h.spec.compute_instance.clone());
    let Some(driver) = r.backend.volumes() else {
        let message = format!("the {} backend does not run volumes", r.backend.name());
        let status = VolumeStatus { state: VolumeState::Failed, attached_to, message: Some(message) };
        return Ok((write(r, &v, status).await?, None));
    };
    let imported_image = match source_of(r, &v).await? {
        Ok(id) => id,
        Err(waiting) => {
            let status = VolumeStatus { attached_to, ..waiting };
            return Ok((write(r, &v, status).await?, None));
        }
    };
    let size_bytes = v.spec.size.to_units_ceil().unwrap_or(0);
    let spec = VolumeSpec { size_bytes, source_image: v.spec.source_image.clone(), imported_image, attached_to };
    let target = Target { id: v.id.clone(), tenant: v.tenant.clone(), name: v.name.clone(), version: v.version, spec };
    let (seen, next) = match driver.ensure(&target).await {
        Ok((seen, next)) => (seen, next.delay()),
        Err(e) => {
            warn!(volume = %v.id, error = %e, "backend error on a volume");
            (VolumeObservation::Pending(e.to_string()), Some(Duration::from_secs(1)))
        }
    };
    let (state, message) = match seen {
        VolumeObservation::Ready if target.spec.attached_to.is_some() => (VolumeState::Attached, None),
        VolumeObservation::Ready => (VolumeState::Ready, None),
        VolumeObservation::Pending(m) => (VolumeState::Pending, Some(m)),
        VolumeObservation::Failed(m) => (VolumeState::Failed, Some(m)),
    };
    let became_usable = state != v.status.state && matches!(state, VolumeState::Ready | VolumeState::Attached);
    let status = VolumeStatus { state, attached_to: target.spec.attached_to.clone(), message };
    let outcome = write(r, &v, status).await?;
    if let Some(h) = holder.filter(|_| became_usable) {
        r.queue.enqueue(ObjectKind::VirtualMachine, &h.spec.compute_instance);
        r.queue.enqueue(ObjectKind::VolumeAttachment, &h.id);
    }
    Ok((outcome, next))
}

/// The imported image (its id) volume `v` starts as, if its source names
/// one; `Err` is the status of a volume waiting for its image, or failed
/// with it.
async fn source_of(r: &Reconciler, v: &VolumeRecord) -> Result<Result<Option<String>, VolumeStatus>, StoreError> {
    let Some(name) = &v.spec.source_image else { return Ok(Ok(None)) };
    let Some(img) = r.store.image_of(&v.id).await? else { return Ok(Ok(None)) };
    Ok(match img.status.state {
        vmaas_model::image::ImageState::Ready => Ok(Some(img.id.clone())),
        vmaas_model::image::ImageState::Failed => Err(VolumeStatus {
            state: VolumeState::Failed,
            message: Some(format!("image {name:?} could not be imported: {}", img.status.message.clone().unwrap_or_default())),
            ..Default::default()
        }),
        _ => Err(VolumeStatus {
            state: VolumeState::Pending,
            message: Some(format!("waiting for image {name:?} to be imported")),
            ..Default::default()
        }),
    })
}

/// A deleted volume: its disk removed once nothing holds it, then its record.
async fn remove_volume(r: &Reconciler, v: &VolumeRecord, held: bool) -> Pass {
    if held {
        return Ok((Outcome::Unchanged, Some(WAIT)));
    }
    if let Some(driver) = r.backend.volumes() {
        match driver.delete(&v.id).await {
            Ok(Cleanup::Done) => {}
            Ok(Cleanup::InProgress) => return Ok((Outcome::Unchanged, Some(WAIT))),
            Err(e) => {
                warn!(volume = %v.id, error = %e, "removing a volume failed; will retry");
                return Ok((Outcome::BackendError, Some(Duration::from_secs(1))));
            }
        }
    }
    r.store.remove(&v.id).await?;
    info!(volume = %v.id, name = %v.name, "volume removed");
    Ok((Outcome::Removed, None))
}

/// A volume attachment: its state from where its VM says the volume is.
pub(crate) async fn reconcile_attachment(r: &Reconciler, id: &str) -> Pass {
    let Some(a) = get::<VolumeAttachment>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    let vm = match r.store.get_vm(&a.spec.compute_instance, &Scope::All).await {
        Ok(vm) => Some(vm).filter(|vm| vm.deleted_at.is_none()),
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let seen = r.volumes_seen.of(&a.spec.compute_instance, &a.spec.volume);
    let mut status = VolumeAttachmentStatus { serial: a.status.serial.clone(), ..Default::default() };
    if a.deleted_at.is_some() {
        if vm.is_some() && matches!(seen, None | Some(Some(DiskPresence::Attached | DiskPresence::Detaching))) {
            r.queue.enqueue(ObjectKind::VirtualMachine, &a.spec.compute_instance);
            status.state = VolumeAttachmentState::Deleting;
            status.message = Some("waiting for the guest to release the disk".into());
            return Ok((write(r, &a, status).await?, Some(WAIT)));
        }
        r.store.remove(&a.id).await?;
        r.queue.enqueue(ObjectKind::Volume, &a.spec.volume);
        info!(attachment = %a.id, volume = %a.spec.volume, vm = %a.spec.compute_instance, "volume detached");
        return Ok((Outcome::Removed, None));
    }
    let volume = get::<Volume>(r, &a.spec.volume).await?;
    (status.state, status.message) = match (vm, volume.map(|v| v.status), seen) {
        (None, ..) => (VolumeAttachmentState::Failed, Some("its virtual machine is gone".into())),
        (_, None, _) => (VolumeAttachmentState::Failed, Some("its volume is gone".into())),
        (_, Some(VolumeStatus { state: VolumeState::Failed, message, .. }), _) => (VolumeAttachmentState::Failed, message),
        (_, Some(VolumeStatus { state: VolumeState::Pending, .. }), _) => {
            (VolumeAttachmentState::Pending, Some("waiting for the volume's disk to be made".into()))
        }
        (_, _, Some(Some(DiskPresence::Attached))) => (VolumeAttachmentState::Ready, None),
        (_, _, Some(Some(DiskPresence::Failed(m)))) => (VolumeAttachmentState::Failed, Some(m)),
        (Some(vm), ..) => {
            r.queue.enqueue(ObjectKind::VirtualMachine, &vm.id);
            (VolumeAttachmentState::Pending, Some("waiting for the virtual machine to take the disk".into()))
        }
    };
    Ok((write(r, &a, status).await?, None))
}
