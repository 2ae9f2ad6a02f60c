//! The REST declaration of [`crate::app::resources::snapshots`]: its state
//! names and what the OpenAPI document says of its operations.

use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotState};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};

impl Resource for ComputeInstanceSnapshot {
    const STATES: &'static [&'static str] = ComputeInstanceSnapshotState::NAMES;
    const DOCS: Docs = Docs {
        create: "Take a snapshot of a VM's disks (its own and the volumes on it), online while it runs or offline while it is stopped.\nIt is READY once taken, with its size and consistency.",
        patch: FIXED_SPEC,
        remove: "Delete a snapshot and its data; refused (409 naming the VM) while a restore from it, or a clone of it, is under way.",
        create_errors: &[(409, "The name is taken"), (429, "The tenant's disk quota is used up")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[(409, "FAILED_PRECONDITION: a restore from it is under way")],
    };
}
