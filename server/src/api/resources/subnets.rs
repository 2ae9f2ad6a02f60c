//! The REST declaration of [`crate::app::resources::subnets`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{Subnet, SubnetState};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};

impl Resource for Subnet {
    const STATES: &'static [&'static str] = SubnetState::NAMES;
    const DOCS: Docs = Docs {
        create: "Create a subnet. It is PENDING until the backend runs its segment.",
        patch: FIXED_SPEC,
        remove: "Delete a subnet; refused (409) while VMs are attached to it.",
        create_errors: &[(409, "The name is taken")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[(409, "FAILED_PRECONDITION: VMs are attached to it")],
    };
}
