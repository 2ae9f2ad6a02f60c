//! The REST declaration of [`crate::app::resources::security_groups`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{SecurityGroup, SecurityGroupState};

use crate::api::resource::{Docs, Resource};

impl Resource for SecurityGroup {
    const STATES: &'static [&'static str] = SecurityGroupState::NAMES;
    const DOCS: Docs = Docs {
        create: "Create a security group for the NICs of one of your virtual networks.",
        patch: "Replace a security group's `ingress` and/or `egress` rules; every NIC that has it enforces them at once, without a restart.\nSend `object.metadata.version` to refuse lost updates: a stale version gets 409.",
        remove: "Delete a security group; refused (409) while NICs have it.",
        create_errors: &[(409, "The name is taken")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[(409, "FAILED_PRECONDITION: NICs have it")],
    };
}
