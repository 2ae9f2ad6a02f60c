//! Volumes and their attachments to VMs in the store. An attachment refers
//! to its volume, so a volume cannot be removed while attached; VMs are
//! not pinned by them (a VM's deletion detaches its volumes).

use vmaas_model::volume::{VOLUME_ATTACHMENT_TYPE_URL, VOLUME_TYPE_URL};
use vmaas_model::{ObjectKind, Volume, VolumeAttachment, VolumeAttachmentSpec, VolumeAttachmentStatus, VolumeSpec, VolumeStatus};

use super::record::Record;

crate::record_kind! {
    /// The volume kind.
    VolumeKind: ObjectKind::Volume, VolumeSpec, VolumeStatus, Volume, VOLUME_TYPE_URL
}

crate::record_kind! {
    /// The volume attachment kind.
    VolumeAttachmentKind: ObjectKind::VolumeAttachment, VolumeAttachmentSpec, VolumeAttachmentStatus, VolumeAttachment,
        VOLUME_ATTACHMENT_TYPE_URL
}

/// A stored volume.
pub type VolumeRecord = Record<VolumeKind>;
/// A stored volume attachment.
pub type VolumeAttachmentRecord = Record<VolumeAttachmentKind>;

/// The role of an attachment's reference to its volume.
pub const VOLUME_OF: &str = "volume";
