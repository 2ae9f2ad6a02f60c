//! The REST declaration of [`crate::app::resources::ip_attachments`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{ExternalIpAttachment, ExternalIpAttachmentState};

use crate::api::resource::{Docs, Resource};

impl Resource for ExternalIpAttachment {
    const STATES: &'static [&'static str] = ExternalIpAttachmentState::NAMES;
    const DOCS: Docs = Docs {
        create: "Attach an external IP to a VM.",
        patch: "Move an attachment to another VM (`spec.compute_instance`).\nThe address leaves the old VM and answers with the new one's ports.",
        remove: "Detach: the address stops answering for the VM and is free to attach again.",
        create_errors: &[(409, "The name is taken, or the address is attached already")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[],
    };
}
