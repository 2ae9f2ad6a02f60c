//! OS images VMs boot from (seed 001's "list available base OS images").
//! Public images are the administrator's: the backend's catalog (the qemu
//! backend's images directory). An image is named by `vm_image` in a
//! template or a VM's parameters; `status.references` counts the VMs
//! booting from it and the volumes starting as it.

use serde::{Deserialize, Serialize};

/// The `@type` of an image in API responses.
pub const IMAGE_TYPE_URL: &str = "type.googleapis.com/vmaas.v1.Image";

/// Who an image belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageMetadata {
    /// Its name, which `vm_image` uses.
    pub name: String,
    /// Published by the administrators for every tenant.
    pub public: bool,
}

/// What the image is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageSpec {
    /// What it holds, as its publisher describes it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

crate::wire_states! {
    /// The state of an image.
    ImageState {
        /// Known, not usable yet.
        Pending = "IMAGE_STATE_PENDING",
        /// Being imported.
        Importing = "IMAGE_STATE_IMPORTING",
        /// VMs can boot from it.
        Ready = "IMAGE_STATE_READY",
        /// Unusable; see the message.
        Failed = "IMAGE_STATE_FAILED",
    }
}

/// What the image is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageStatus {
    /// Overall state.
    pub state: ImageState,
    /// The disk format: `qcow2` or `raw`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub format: String,
    /// The size the guest sees, in bytes.
    #[serde(default)]
    pub virtual_size: u64,
    /// The VMs booting from it and the volumes made from it (an image in
    /// use is never removed).
    #[serde(default)]
    pub references: u32,
    /// Why it is not usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An image as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Image {
    /// Always `type.googleapis.com/vmaas.v1.Image`.
    #[serde(rename = "@type")]
    pub type_url: String,
    /// Its name (images are named, not numbered).
    pub id: String,
    /// Name and owner.
    pub metadata: ImageMetadata,
    /// What it is.
    pub spec: ImageSpec,
    /// What it is now.
    pub status: ImageStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_serialises_with_wire_names() {
        let i = Image {
            type_url: IMAGE_TYPE_URL.into(),
            id: "debian-12".into(),
            metadata: ImageMetadata { name: "debian-12".into(), public: true },
            spec: ImageSpec::default(),
            status: ImageStatus { state: ImageState::Ready, format: "qcow2".into(), virtual_size: 1 << 30, references: 2, message: None },
        };
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(v["status"]["state"], "IMAGE_STATE_READY");
        assert_eq!(v["status"]["virtual_size"], 1u64 << 30);
        assert!(v["spec"].get("description").is_none());
        assert_eq!(serde_json::from_value::<Image>(v).unwrap(), i);
    }
}
