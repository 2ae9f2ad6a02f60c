//! `volume_attachments`: one of the caller's volumes on one of its VMs. A
//! running VM gets it by hotplug; deleting the attachment hot-unplugs it,
//! and the attachment is gone once the guest has released the disk. A
//! volume has one attachment at a time.

use tracing::info;
use vmaas_model::volume::disk_serial;
use vmaas_model::{ObjectKind, ValidationErrors, VolumeAttachment, VolumeAttachmentSpec, VolumeAttachmentStatus};

use crate::app::kind::Kind;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{VOLUME_OF, VolumeAttachmentRecord};

const VM_FIELD: &str = "object.spec.compute_instance";

impl Kind for VolumeAttachment {
    type Patch = simple::Relabel;

    fn check_spec(spec: &VolumeAttachmentSpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: VolumeAttachmentRecord) -> Result<VolumeAttachmentRecord, ApiError> {
        let scope = owned_by(&caller.tenant);
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let volume = vmaas_admission::volumes::free_volume(&s.store, &scope, &rec.spec.volume).await?;
        let vm = simple::row(&s, &scope, ObjectKind::VirtualMachine, &rec.spec.compute_instance, VM_FIELD).await?;
        rec.spec = VolumeAttachmentSpec { volume: volume.id.clone(), compute_instance: vm.id.clone(), auto_delete: rec.spec.auto_delete };
        rec.status = VolumeAttachmentStatus { serial: Some(disk_serial(&volume.id)), ..Default::default() };
        s.store.insert_record(&rec, vec![(volume.id.clone(), VOLUME_OF.to_owned())]).await?;
        adm.commit().await?;
        for (kind, id) in [(ObjectKind::VolumeAttachment, &rec.id), (ObjectKind::Volume, &volume.id), (ObjectKind::VirtualMachine, &vm.id)]
        {
            s.queue.enqueue(kind, id);
        }
        info!(attachment = %rec.id, volume = %volume.id, vm = %vm.id, "volume attached");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: simple::Relabel) -> Result<VolumeAttachmentRecord, ApiError> {
        simple::relabel::<Self>(s, caller, id, p).await
    }

    async fn remove(s: &AppState, caller: &Caller, id: &str) -> Result<VolumeAttachmentRecord, ApiError> {
        let out = simple::remove::<Self>(s, caller, id).await?;
        s.queue.enqueue(ObjectKind::VirtualMachine, &out.spec.compute_instance);
        Ok(out)
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::volume::reconcile_attachment(r, id))
    }
}
