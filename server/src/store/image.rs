//! Images tenants (and administrators, publicly) import, in the store. A
//! VM or volume naming one does not pin it in the database (they name it
//! by name, resolved when used); the API counts its references and
//! refuses to delete one in use.

use vmaas_model::image::{IMAGE_TYPE_URL, Image, ImageMetadata, ImageSpec, ImageStatus};
use vmaas_model::{Metadata, ObjectKind};

use super::record::{Kind, Record};

/// The imported image kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageKind;

impl Kind for ImageKind {
    const KIND: ObjectKind = ObjectKind::Image;
    type Spec = ImageSpec;
    type Status = ImageStatus;
    type Api = Image;

    fn state(status: &ImageStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: ImageSpec, status: ImageStatus) -> Image {
        let metadata = ImageMetadata {
            name: metadata.name,
            public: spec.public,
            tenant: Some(metadata.tenant),
            creation_timestamp: Some(metadata.creation_timestamp),
            version: Some(metadata.version),
        };
        Image { type_url: IMAGE_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// A stored imported image.
pub type ImageRecord = Record<ImageKind>;

impl ImageRecord {
    /// Whether a VM's or volume's image `reference` names this image: by
    /// its name, or by the URL it is imported from.
    pub fn names(&self, reference: &str) -> bool {
        self.name == reference || (reference.contains("://") && self.spec.source.as_deref() == Some(reference))
    }
}

impl super::Store {
    /// Who uses image `img`: the VMs booting from it and the volumes made
    /// from it (of its tenant, or of every tenant for a public image), as
    /// `(kind, tenant, name)`.
    pub async fn image_users(&self, img: &ImageRecord) -> Result<Vec<(ObjectKind, String, String)>, super::StoreError> {
        let sees = |tenant: &str| img.spec.public || tenant == img.tenant;
        let mut out = Vec::new();
        for vm in self.all_vms().await? {
            if sees(&vm.tenant) && img.names(&vm.machine.boot.image) {
                out.push((ObjectKind::VirtualMachine, vm.tenant, vm.name));
            }
        }
        for v in self.all_records::<super::VolumeKind>().await? {
            if sees(&v.tenant) && v.spec.source_image.as_deref().is_some_and(|r| img.names(r)) {
                out.push((ObjectKind::Volume, v.tenant, v.name));
            }
        }
        Ok(out)
    }
}
