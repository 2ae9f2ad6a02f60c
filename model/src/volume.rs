//! Volumes: block storage that outlives VMs (seed 001), and their
//! attachments to VMs. A volume has a size and, optionally, the image it
//! starts as; a `VolumeAttachment` (`spec.volume`, `spec.compute_instance`,
//! `spec.auto_delete`) puts it on one VM, hotplugged when the VM runs.
//!
//! Attachments are objects of their own, as OSAC's external IP attachments
//! are, rather than a list on the VM: attaching and detaching then never
//! rewrites the VM (no version race with a tenant's PATCH of the VM, no
//! template re-resolution), each attachment has its own state (a hotplug
//! can be pending or fail without the VM failing), and a volume's one
//! attachment is what makes it ATTACHED and undeletable (409 naming the VM).

use serde::{Deserialize, Serialize};

use crate::quantity::Quantity;
use crate::validation::ValidationErrors;

/// The `@type` of a volume in API responses.
pub const VOLUME_TYPE_URL: &str = "type.googleapis.com/vmaas.v1.Volume";
/// The `@type` of a volume attachment in API responses.
pub const VOLUME_ATTACHMENT_TYPE_URL: &str = "type.googleapis.com/vmaas.v1.VolumeAttachment";

/// The smallest volume (1 MiB).
pub const MIN_VOLUME_BYTES: u64 = 1 << 20;

/// The largest volume a spec may ask for (64 TiB); the server's own limit
/// (its disk capacity) applies on top.
pub const MAX_VOLUME_BYTES: u64 = 64 << 40;

/// What the tenant asks for: a disk of `size`, blank or a copy of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    /// Its size, e.g. `10Gi`; only grows.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "10Gi"))]
    pub size: Quantity,
    /// The image it starts as (a copy-on-write overlay of it), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_image: Option<String>,
}

impl VolumeSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        match self.size.to_units_ceil() {
            Some(b) if (MIN_VOLUME_BYTES..=MAX_VOLUME_BYTES).contains(&b) => {}
            _ => errs.push(format!("{prefix}.size"), format!("must be between 1Mi and 64Ti, got {}", self.size)),
        }
        if self.source_image.as_deref().is_some_and(|i| i.trim().is_empty()) {
            errs.push(format!("{prefix}.source_image"), "must name an image when given");
        }
        errs.into_result(())
    }
}

/// What a PATCH of a volume may change: its size, which only grows (a
/// running guest sees the new size at once).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VolumePatchSpec {
    /// The new size; not smaller than the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "20Gi"))]
    pub size: Option<Quantity>,
}

crate::patch_object! {
    /// The object of a PATCH of a volume.
    PatchVolume { spec: VolumePatchSpec }
}

impl VolumeSpec {
    /// This spec with `patch` applied, checked: the size only grows.
    pub fn patched(&self, patch: &VolumePatchSpec) -> Result<Self, ValidationErrors> {
        let mut next = self.clone();
        if let Some(size) = &patch.size {
            next.size = size.clone();
        }
        next.check("object.spec")?;
        let (old, new) = (self.size.to_units_ceil().unwrap_or(0), next.size.to_units_ceil().unwrap_or(0));
        if new < old {
            let why = format!("a volume only grows: {} is smaller than its size {}", next.size, self.size);
            return Err(ValidationErrors::one("object.spec.size", why));
        }
        Ok(next)
    }
}

crate::wire_states! {
    /// The state of a volume.
    VolumeState {
        /// Being made.
        Pending = "VOLUME_STATE_PENDING",
        /// Made, attached to nothing.
        Ready = "VOLUME_STATE_READY",
        /// Attached to a VM (`status.attached_to`).
        Attached = "VOLUME_STATE_ATTACHED",
        /// Could not be made; see the message.
        Failed = "VOLUME_STATE_FAILED",
        /// Being removed.
        Deleting = "VOLUME_STATE_DELETING",
    }
}

/// What the volume is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VolumeStatus {
    /// Overall state.
    pub state: VolumeState,
    /// The VM it is attached to, by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<String>,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

crate::api_object! {
    /// A volume as the API returns it.
    Volume { kind: Volume, spec: VolumeSpec, status: VolumeStatus, type_url: "type.googleapis.com/vmaas.v1.Volume" }
}

/// What the tenant asks for: one of its volumes on one of its VMs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VolumeAttachmentSpec {
    /// The volume, by id or name (stored as the id); immutable.
    pub volume: String,
    /// The VM, by id or name (stored as the id); immutable.
    pub compute_instance: String,
    /// Delete the volume with the VM (default: the volume is detached and kept).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_delete: bool,
}

impl VolumeAttachmentSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.volume.trim().is_empty() {
            errs.push(format!("{prefix}.volume"), "is required: the id or name of one of your volumes");
        }
        if self.compute_instance.trim().is_empty() {
            errs.push(format!("{prefix}.compute_instance"), "is required: the id or name of one of your virtual machines");
        }
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of a volume attachment.
    VolumeAttachmentState {
        /// Waiting for the volume, or for the VM to take it.
        Pending = "VOLUME_ATTACHMENT_STATE_PENDING",
        /// The guest has the disk (`status.device`).
        Ready = "VOLUME_ATTACHMENT_STATE_READY",
        /// Could not be attached; see the message.
        Failed = "VOLUME_ATTACHMENT_STATE_FAILED",
        /// Being detached (the guest acknowledges the unplug).
        Deleting = "VOLUME_ATTACHMENT_STATE_DELETING",
    }
}

/// What the attachment is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VolumeAttachmentStatus {
    /// Overall state.
    pub state: VolumeAttachmentState,
    /// The disk's serial as the guest sees it (`/dev/disk/by-id/virtio-SERIAL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

crate::api_object! {
    /// An attachment as the API returns it.
    VolumeAttachment { kind: VolumeAttachment, spec: VolumeAttachmentSpec, status: VolumeAttachmentStatus, type_url: "type.googleapis.com/vmaas.v1.VolumeAttachment" }
}

/// The serial a volume's disk carries in the guest: its id's first 20
/// characters (virtio-blk serials hold at most 20 bytes).
pub fn disk_serial(volume_id: &str) -> String {
    volume_id.chars().filter(char::is_ascii_alphanumeric).take(20).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_volume_has_a_size_within_bounds() {
        let ok: VolumeSpec = serde_json::from_value(json!({"size": "10Gi"})).unwrap();
        assert!(ok.check("spec").is_ok());
        for (size, ok) in [("0", false), ("512Ki", false), ("1Mi", true), ("64Ti", true), ("65Ti", false)] {
            let spec: VolumeSpec = serde_json::from_value(json!({"size": size})).unwrap();
            assert_eq!(spec.check("spec").is_ok(), ok, "{size}");
        }
        let e =
            serde_json::from_value::<VolumeSpec>(json!({"size": "1Gi", "source_image": " "})).unwrap().check("object.spec").unwrap_err();
        assert_eq!(e.0[0].field, "object.spec.source_image");
        assert!(serde_json::from_value::<VolumeSpec>(json!({"size": "1Gi", "bytes": 4})).is_err(), "unknown fields are refused");
    }

    #[test]
    fn an_attachment_names_a_volume_and_a_vm() {
        let ok: VolumeAttachmentSpec = serde_json::from_value(json!({"volume": "data", "compute_instance": "web"})).unwrap();
        assert!(ok.check("spec").is_ok());
        assert!(!ok.auto_delete, "volumes outlive their VMs unless asked");
        let bad: VolumeAttachmentSpec = serde_json::from_value(json!({"volume": "", "compute_instance": " "})).unwrap();
        let fields: Vec<String> = bad.check("spec").unwrap_err().0.into_iter().map(|f| f.field).collect();
        assert_eq!(fields, ["spec.volume", "spec.compute_instance"]);
    }

    #[test]
    fn a_volume_only_grows() {
        let spec: VolumeSpec = serde_json::from_value(json!({"size": "2Gi"})).unwrap();
        let grow: VolumePatchSpec = serde_json::from_value(json!({"size": "3Gi"})).unwrap();
        assert_eq!(spec.patched(&grow).unwrap().size.to_string(), "3Gi");
        let shrink: VolumePatchSpec = serde_json::from_value(json!({"size": "1Gi"})).unwrap();
        let e = spec.patched(&shrink).unwrap_err();
        assert_eq!(e.0[0].field, "object.spec.size");
        assert!(e.0[0].reason.contains("only grows"), "{e:?}");
        assert_eq!(spec.patched(&VolumePatchSpec::default()).unwrap(), spec);
    }

    #[test]
    fn states_and_serials() {
        assert_eq!(VolumeState::default().as_str(), "VOLUME_STATE_PENDING");
        assert_eq!(serde_json::to_value(VolumeAttachmentState::Ready).unwrap(), "VOLUME_ATTACHMENT_STATE_READY");
        assert_eq!(disk_serial("0b3c5e0e-1234-4abc-9def-0123456789ab"), "0b3c5e0e12344abc9def");
    }
}
