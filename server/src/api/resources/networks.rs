//! The REST declaration of [`crate::app::resources::networks`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{VirtualNetwork, VirtualNetworkState};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};

impl Resource for VirtualNetwork {
    const STATES: &'static [&'static str] = VirtualNetworkState::NAMES;
    const DOCS: Docs = Docs {
        create: "Create a virtual network. It is PENDING until the backend has set it up.",
        patch: FIXED_SPEC,
        remove: "Delete a virtual network; refused (409) while it has subnets.\nIt is gone (404) once the backend has removed it.",
        create_errors: &[(409, "The name is taken")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[(409, "FAILED_PRECONDITION: it has subnets")],
    };
}
