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
