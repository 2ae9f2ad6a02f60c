//! VMs moved here from another cluster: the boot disk arrives as a
//! DataVolume with an `upload` source in the VM's namespace (named as the
//! VM's root disk would be, labelled with the VM's id and [`ARRIVED`]),
//! filled through CDI's upload proxy the way `virtctl image-upload` fills
//! one, and checked against the export's SHA-256 on its way. The VM is
//! then made with that DataVolume as its boot disk (no template: nothing
//! is cloned from its image), for as long as the DataVolume is there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, Driver, ExportFile, VmTarget};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::names::derived;

use crate::cluster::as_json;
use crate::names::labels;
use crate::shared::Shared;
use crate::upload::Uploads;

/// The label of a DataVolume that arrived with a moved VM: the disk it is.
pub(crate) const ARRIVED: &str = "vmaas.io/arrived-disk";

/// How long CDI may take to fill the DataVolume once it has the file.
const FILL_WAIT: Duration = Duration::from_secs(300);

/// Takes moved VMs' boot disks through CDI's upload proxy.
pub struct Arrivals {
    shared: Arc<Shared>,
    uploads: Arc<Uploads>,
}

impl Arrivals {
    /// Takes disks through `uploads`.
    pub(crate) fn new(shared: Arc<Shared>, uploads: Arc<Uploads>) -> Self {
        Self { shared, uploads }
    }

    /// DataVolume `ns/name`, for `t`'s arriving boot disk.
    fn data_volume(&self, t: &VmTarget, ns: &str, name: &str) -> Value {
        let root = t.spec.machine.disks.first();
        let mut labels = labels(ObjectKind::VirtualMachine, &t.id);
        labels.insert(ARRIVED.to_owned(), "rootdisk".to_owned());
        let mut storage = json!({"resources": {"requests": {"storage": root.map_or("10Gi", |d| d.size.as_str())}}});
        if let Some(class) = root.and_then(|d| d.storage_class.clone()).or_else(|| self.shared.cfg.storage_class.clone()) {
            storage["storageClassName"] = json!(class);
        }
        let mut spec = json!({"source": {"upload": {}}, "storage": storage});
        if let Some(p) = root.and_then(|d| d.preallocation) {
            spec["preallocation"] = json!(p);
        }
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec})
    }

    /// Sends `disk` into DataVolume `ns/name` and waits until CDI has filled it.
    async fn fill(&self, ns: &str, name: &str, disk: &ExportFile) -> Result<(), BackendError> {
        let context = format!("taking the moved disk into DataVolume {ns}/{name}");
        let Some(said) = disk.sha256.as_deref() else {
            return Err(BackendError::invalid(context, "the disk's SHA-256 is not known: it is hashed before it is sent"));
        };
        self.uploads.ready(ns, name).await.map_err(|e| BackendError::transient(context.clone(), e))?;
        let token = self.uploads.token(ns, name).await?;
        let body = vmaas_backend::image::file_upload(&disk.path, 1 << 20).await.map_err(|e| BackendError::transient(context.clone(), e))?;
        let sent = self.uploads.send(disk.size, &token, body).await.map_err(|e| BackendError::transient(context.clone(), e))?;
        if sent.sha256 != said || sent.bytes != disk.size {
            let why = format!("sent {} bytes of SHA-256 {}; the export has {} bytes of {said}", sent.bytes, sent.sha256, disk.size);
            return Err(BackendError::transient(context, why));
        }
        let deadline = Instant::now() + FILL_WAIT;
        loop {
            let phase = self.shared.data_volumes.get(ns, name).and_then(|d| as_json(&d)["status"]["phase"].as_str().map(str::to_owned));
            match phase.as_deref() {
                Some("Succeeded") => return Ok(()),
                Some("Failed") => return Err(BackendError::transient(context, "CDI says it failed")),
                _ if Instant::now() > deadline => {
                    return Err(BackendError::transient(context, format!("not filled in {} s", FILL_WAIT.as_secs())));
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

impl Shared {
    /// The DataVolume VM `id`'s boot disk arrived as, when it was moved here.
    pub(crate) fn arrived(&self, id: &str) -> Option<String> {
        self.data_volumes
            .of(id)
            .into_iter()
            .find(|d| d.metadata.labels.as_ref().is_some_and(|l| l.contains_key(ARRIVED)) && d.metadata.deletion_timestamp.is_none())
            .and_then(|d| d.metadata.name.clone())
    }
}

#[async_trait]
impl vmaas_backend::Arrivals for Arrivals {
    async fn arrive(&self, t: &VmTarget, disk: &ExportFile) -> Result<(), BackendError> {
        let s = &self.shared;
        s.listed()?;
        let (ns, _) = s.placement(t).await?;
        if t.spec.attachments.is_empty() {
            s.ensure_namespace(&ns, &t.tenant).await?;
        }
        let name = derived(&t.name, "root");
        let dv = self.data_volume(t, &ns, &name);
        s.cluster.apply(&s.cluster.res.data_volume, &dv).await?;
        if let Err(e) = self.fill(&ns, &name, disk).await {
            s.cluster.delete(&s.cluster.res.data_volume, &ns, &name).await?;
            return Err(e);
        }
        info!(vm = %t.id, data_volume = %format!("{ns}/{name}"), bytes = disk.size, "moved boot disk taken in");
        Ok(())
    }

    async fn abandon(&self, id: &str) -> Result<Cleanup, BackendError> {
        crate::vm::Vms(self.shared.clone()).delete(id).await
    }
}
