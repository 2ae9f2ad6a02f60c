//! The REST declaration of [`crate::app::resources::volume_attachments`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{VolumeAttachment, VolumeAttachmentState};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};

impl Resource for VolumeAttachment {
    const STATES: &'static [&'static str] = VolumeAttachmentState::NAMES;
    const DOCS: Docs = Docs {
        create: "Attach a volume to a VM: hotplugged if the VM runs, else there when it starts.",
        patch: FIXED_SPEC,
        remove: "Detach: a running guest gets a hot-unplug request.\nThe attachment is gone once the guest released the disk (`VOLUME_ATTACHMENT_STATE_DELETING` until then).",
        create_errors: &[(409, "The name is taken, or the volume is attached already")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[],
    };
}
