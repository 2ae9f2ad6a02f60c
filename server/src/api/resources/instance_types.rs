//! The REST declaration of [`crate::app::resources::instance_types`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{InstanceType, InstanceTypeState};

use crate::api::resource::{Docs, Resource};

impl Resource for InstanceType {
    const STATES: &'static [&'static str] = InstanceTypeState::NAMES;
    const DOCS: Docs = Docs {
        create: "Publish an instance type (administrators): `spec.cores`, `spec.memory_gib`, optionally `spec.gpu`.\nIts shape is fixed once published.",
        patch: "Change an instance type's description or lifecycle (administrators).\n`spec.state` DEPRECATED with `spec.deprecation.replacement`, or OBSOLETE; the server sets the times.",
        remove: "Delete an instance type (administrators); refused (409 naming them) while VMs use it.",
        create_errors: &[(403, "The caller is not an administrator"), (409, "The name is taken")],
        patch_errors: &[(403, "The caller is not an administrator"), (409, "The version sent is stale")],
        remove_errors: &[(403, "The caller is not an administrator"), (409, "FAILED_PRECONDITION: virtual machines use it")],
    };
}
