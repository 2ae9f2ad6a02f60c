//! Volumes on a cluster: a CDI `DataVolume` each (blank, a clone of an
//! image's DataSource, or an imported image's), made in the namespace of
//! the VM it is first attached to (else its tenant's), and hotplugged into
//! VMs of that namespace as a SCSI disk with the volume's serial. A
//! DataVolume cannot leave its namespace: a VM elsewhere (on another
//! subnet) cannot use the volume, and says so.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kube::core::DynamicObject;
use serde_json::json;
use vmaas_backend::{
    BackendError, Cleanup, DiskPresence, Driver, Requeue, VolumeDisk, VolumeObservation, VolumePresence, VolumeSpec, VolumeTarget,
};
use vmaas_model::k8s::volume::{ImageSources, data_volume, observe_data_volume};
use vmaas_model::volume::VolumeState;
use vmaas_model::{ObjectKind, Quantity};

use crate::cluster::as_json;
use crate::names::labels;
use crate::shared::Shared;

/// The driver of volumes.
pub struct Volumes(pub(crate) Arc<Shared>);

impl Shared {
    /// The DataVolume of volume `id`, as last seen.
    fn data_volume_of(&self, id: &str) -> Option<Arc<DynamicObject>> {
        self.data_volumes.of(id).into_iter().next()
    }

    /// Where each of `volumes` is on a VM in namespace `ns`.
    pub(crate) fn presence(&self, ns: &str, volumes: &[VolumeDisk]) -> VolumePresence {
        volumes
            .iter()
            .map(|v| {
                let presence = match self.data_volume_of(&v.volume) {
                    Some(dv) if dv.metadata.namespace.as_deref() == Some(ns) => DiskPresence::Attached,
                    Some(dv) => DiskPresence::Failed(format!(
                        "the volume's DataVolume is in namespace {}; this VM runs in {ns} (on another subnet), and a DataVolume cannot be used across namespaces",
                        dv.metadata.namespace.as_deref().unwrap_or_default()
                    )),
                    None => DiskPresence::Failed("the volume's DataVolume does not exist yet".into()),
                };
                (v.volume.clone(), presence)
            })
            .collect()
    }
}

#[async_trait]
impl Driver<VolumeSpec, VolumeObservation> for Volumes {
    async fn ensure(&self, t: &VolumeTarget) -> Result<(VolumeObservation, Requeue), BackendError> {
        let s = &self.0;
        s.listed()?;
        let seen = s.data_volume_of(&t.id);
        // A DataVolume stays where it was made; a new one goes where its VM is.
        let ns = match (&seen, &t.spec.attached_to) {
            (Some(dv), _) => dv.metadata.namespace.clone().unwrap_or_default(),
            (None, Some(vm)) => match s.vms.of(vm).first() {
                Some(v) => v.metadata.namespace.clone().unwrap_or_default(),
                None => {
                    return Ok((
                        VolumeObservation::Pending("waiting for the VM it is attached to".into()),
                        Requeue::after(Duration::from_secs(2)),
                    ));
                }
            },
            (None, None) => {
                let ns = s.home(&t.tenant, None).await?;
                s.ensure_namespace(&ns, &t.tenant).await?;
                ns
            }
        };
        let source_image = match &t.spec.imported_image {
            Some(image) => Some(crate::image::data_source_name(image)),
            None => t.spec.source_image.clone(),
        };
        let spec: vmaas_model::volume::VolumeSpec =
            serde_json::from_value(json!({"size": Quantity::from_bytes(t.spec.size_bytes), "source_image": source_image}))
                .map_err(|e| BackendError::invalid("describing the volume", e))?;
        let sources = ImageSources { data_source_namespace: s.cfg.images_namespace.clone(), storage_class: s.cfg.storage_class.clone() };
        let mut dv = serde_json::to_value(data_volume(&t.id, &ns, &spec, &sources))
            .map_err(|e| BackendError::invalid("rendering the DataVolume", e))?;
        dv["metadata"]["labels"] = json!(labels(ObjectKind::Volume, &t.id));
        let size = |v: &serde_json::Value| v["spec"]["storage"]["resources"]["requests"]["storage"].clone();
        if seen.as_deref().is_none_or(|o| size(&as_json(o)) != size(&dv)) {
            s.cluster.apply(&s.cluster.res.data_volume, &dv).await?;
        }
        let (state, message) = observe_data_volume(s.data_volume_of(&t.id).map(|o| as_json(&o)).as_ref());
        Ok(match state {
            VolumeState::Failed => (VolumeObservation::Failed(message.unwrap_or_default()), Requeue::AwaitChange),
            VolumeState::Pending => (VolumeObservation::Pending(message.unwrap_or_default()), Requeue::after(Duration::from_secs(15))),
            _ => (VolumeObservation::Ready, Requeue::AwaitChange),
        })
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        let left = s.cluster.delete_all_of(&s.cluster.res.data_volume, id).await?;
        Ok(if left == 0 { Cleanup::Done } else { Cleanup::InProgress })
    }
}
