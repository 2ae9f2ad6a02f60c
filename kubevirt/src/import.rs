//! Images imported through the API, on a cluster: CDI imports the URL into
//! a DataVolume in the images namespace (an `http` source, or a `registry`
//! source for a `docker://` containerDisk) (`image-<id>`), and a `DataSource`
//! of the same name points at its PVC, so VMs and volumes clone it like a
//! catalog image. CDI converts to raw; its HTTP source has no checksum, so
//! an import that asks for a SHA-256 is refused rather than left unchecked.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use vmaas_backend::{BackendError, Cleanup, Driver, ImageFile, ImageImport, ImageObservation, ImageTarget, Requeue};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::names::derived;
use vmaas_model::k8s::volume::{import_source, observe_data_volume, pull_secret, registry_source};
use vmaas_model::volume::VolumeState;

use crate::cluster::as_json;
use crate::image::data_source_name;
use crate::names::labels;
use crate::shared::Shared;

/// The driver of imported images.
pub struct Imports(pub(crate) Arc<Shared>);

impl Shared {
    /// The DataVolume of image `t`, filled from `source` (CDI's source: a
    /// URL, a registry with the credentials of a Secret, or an upload).
    pub(crate) fn data_volume(&self, t: &ImageTarget, source: Value) -> Value {
        let mut storage = json!({"resources": {"requests": {"storage": self.cfg.image_volume_size}}});
        if let Some(class) = &self.cfg.storage_class {
            storage["storageClassName"] = json!(class);
        }
        json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "metadata": {"name": data_source_name(&t.id), "namespace": self.cfg.images_namespace, "labels": labels(ObjectKind::Image, &t.id)},
            "spec": {"source": source, "storage": storage},
        })
    }

    /// The DataSource of image `t`: its DataVolume's volume, by which VMs
    /// clone it.
    pub(crate) fn data_source(&self, t: &ImageTarget) -> Value {
        let (name, ns) = (data_source_name(&t.id), &self.cfg.images_namespace);
        json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
            "metadata": {"name": name, "namespace": ns, "labels": labels(ObjectKind::Image, &t.id)},
            "spec": {"source": {"pvc": {"name": name, "namespace": ns}}},
        })
    }
}

impl Shared {
    /// Where uploaded image `t` is: refused (its DataSource says why),
    /// waiting for its upload (no DataVolume yet), or as CDI reports it.
    fn uploaded(&self, t: &ImageTarget) -> (ImageObservation, Requeue) {
        if self.cfg.upload_proxy.is_none() {
            let why = "this server takes no uploads: start it with --cdi-upload-proxy (CDI's upload proxy), or import from a URL";
            return (ImageObservation::Failed(why.into()), Requeue::AwaitChange);
        }
        let name = data_source_name(&t.id);
        let ds = self.data_sources.get(&self.cfg.images_namespace, &name).map(|o| as_json(&o));
        if let Some(why) = ds.as_ref().and_then(|d| d["metadata"]["annotations"][crate::upload::REFUSED].as_str()) {
            return (ImageObservation::Failed(why.to_owned()), Requeue::AwaitChange);
        }
        match self.data_volumes.get(&self.cfg.images_namespace, &name) {
            Some(dv) => observe(Some(&as_json(&dv)), &self.cfg.image_volume_size),
            None => (
                ImageObservation::Pending(format!("waiting for the upload (PUT /api/fulfillment/v1/images/{}/content)", t.id)),
                Requeue::AwaitChange,
            ),
        }
    }
}

/// The CDI source of `url`, pulled with the credentials in `secret`.
fn source(url: &str, secret: Option<&str>) -> Value {
    match secret {
        Some(secret) => registry_source(url, secret),
        None => import_source(url),
    }
}

/// The name of the Secret holding imported image `id`'s registry
/// credentials while CDI pulls it.
fn pull_secret_name(id: &str) -> String {
    derived(&data_source_name(id), "pull")
}

/// The image as CDI reports its DataVolume.
fn observe(dv: Option<&Value>, size: &str) -> (ImageObservation, Requeue) {
    let (state, message) = observe_data_volume(dv);
    let settle = Requeue::after(Duration::from_secs(5));
    match state {
        VolumeState::Failed => (ImageObservation::Failed(message.unwrap_or_default()), Requeue::AwaitChange),
        VolumeState::Pending => (ImageObservation::Pending(message.unwrap_or_default()), settle),
        _ => {
            let bytes = vmaas_model::Quantity::parse(size).ok().and_then(|q| q.to_units_ceil()).unwrap_or(0);
            let file = ImageFile { format: "raw".into(), virtual_size: bytes, size_bytes: bytes, sha256: String::new() };
            (ImageObservation::Ready(file), Requeue::AwaitChange)
        }
    }
}

#[async_trait]
impl Driver<ImageImport, ImageObservation> for Imports {
    async fn ensure(&self, t: &ImageTarget) -> Result<(ImageObservation, Requeue), BackendError> {
        let s = &self.0;
        s.listed()?;
        let Some(url) = &t.spec.source else { return Ok(s.uploaded(t)) };
        if t.spec.sha256.is_some() {
            let why = "CDI's HTTP import cannot check a SHA-256: import without `sha256`, or check the file at its source";
            return Ok((ImageObservation::Failed(why.into()), Requeue::AwaitChange));
        }
        let (name, ns) = (data_source_name(&t.id), s.cfg.images_namespace.clone());
        let seen = s.data_volumes.get(&ns, &name);
        let secret = pull_secret_name(&t.id);
        let credentials = t.spec.credentials.as_ref();
        if seen.is_none() {
            if let Some(c) = credentials {
                let mut manifest = pull_secret(&secret, &ns, &c.username, &c.password);
                manifest["metadata"]["labels"] = json!(labels(ObjectKind::Image, &t.id));
                s.cluster.apply(&s.cluster.res.secret, &manifest).await?;
            }
            let dv = s.data_volume(t, source(url, credentials.map(|_| secret.as_str())));
            s.cluster.apply(&s.cluster.res.data_volume, &dv).await?;
        }
        if s.data_sources.get(&ns, &name).is_none() {
            s.cluster.apply(&s.cluster.res.data_source, &s.data_source(t)).await?;
        }
        let (observed, next) = observe(seen.map(|o| as_json(&o)).as_ref(), &s.cfg.image_volume_size);
        if credentials.is_some() && !matches!(observed, ImageObservation::Pending(_)) {
            // CDI has pulled (or given up): the password leaves the cluster.
            s.cluster.delete(&s.cluster.res.secret, &ns, &secret).await?;
        }
        Ok((observed, next))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        let res = &s.cluster.res;
        let mut left = 0;
        s.cluster.delete(&res.secret, &s.cfg.images_namespace, &pull_secret_name(id)).await?;
        for ar in [&res.data_source, &res.data_volume] {
            left += s.cluster.delete_all_of(ar, id).await?;
        }
        Ok(if left == 0 { Cleanup::Done } else { Cleanup::InProgress })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_is_ready_when_cdi_filled_its_data_volume() {
        assert!(matches!(observe(None, "10Gi").0, ImageObservation::Pending(_)));
        let going = json!({"status": {"phase": "ImportInProgress", "progress": "12.5%"}});
        assert!(matches!(observe(Some(&going), "10Gi").0, ImageObservation::Pending(m) if m.contains("12.5%")));
        let done = json!({"status": {"phase": "Succeeded"}});
        assert!(matches!(observe(Some(&done), "10Gi").0, ImageObservation::Ready(f) if f.virtual_size == 10 << 30 && f.format == "raw"));
        let failed = json!({"status": {"phase": "Failed", "conditions": [{"type": "Running", "message": "HTTP 404"}]}});
        assert!(matches!(observe(Some(&failed), "10Gi").0, ImageObservation::Failed(m) if m == "HTTP 404"));
    }
}
