//! The REST declaration of [`crate::app::resources::volumes`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{Volume, VolumeState};

use crate::api::resource::{Docs, Resource};

impl Resource for Volume {
    const STATES: &'static [&'static str] = VolumeState::NAMES;
    const DOCS: Docs = Docs {
        create: "Create a volume (`spec.size`, optionally `spec.source_image`); it is READY once its disk is made.",
        patch: "Grow a volume (`spec.size`; it never shrinks).\nA running VM that has it sees the new size at once.",
        remove: "Delete a volume and its data; refused (409 naming the VM) while attached.",
        create_errors: &[(409, "The name is taken"), (429, "The host's disk or the tenant's disk quota has no room for it")],
        patch_errors: &[(409, "The version sent is stale"), (429, "The host's disk or the tenant's disk quota has no room for the growth")],
        remove_errors: &[(409, "FAILED_PRECONDITION: it is attached to a VM")],
    };
}
