//! A `vmaas_virtual_machine`'s own disks: the `boot_disk` block (a boot
//! disk larger than the template's, or in a storage tier) and the
//! `additional_disk` blocks (empty disks beside the template's), as OSAC's
//! compute instance has them.

use rmpv::Value;
use vmaas_model::{VirtualMachine, VmDisk};

use crate::proto::schema::{NestedBlock, nested_block::NestingMode};
use crate::schema::{Mode, NUMBER, STRING, attr, nested};
use crate::value::{self, get, object, string};

/// The two blocks.
pub(crate) fn disk_blocks() -> [NestedBlock; 2] {
    [
        block(
            "boot_disk",
            NestingMode::Single,
            "Its boot disk, when not as the template makes it: at least the template's size. Growing it changes the VM in place (on qemu the running guest sees the new size at once); a smaller size or another tier replaces the VM.",
        ),
        block(
            "additional_disk",
            NestingMode::List,
            "An empty disk beside the template's, in order (`disk1`, `disk2`, … in the guest). Changing them replaces the VM.",
        ),
    ]
}

fn block(name: &str, nesting: NestingMode, description: &str) -> NestedBlock {
    let attributes = vec![
        attr("size_gib", NUMBER, Mode::Required, "Its size in GiB."),
        attr(
            "storage_tier",
            STRING,
            Mode::Optional,
            "Its storage tier: the storage class its volume is made in (KubeVirt; the qemu backend refuses one).",
        ),
    ];
    nested(name, nesting, description, attributes, vec![])
}

/// One block as the model's disk.
fn disk(b: &Value) -> Option<VmDisk> {
    if b.is_nil() {
        return None;
    }
    let size_gib = get(b, "size_gib").as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    Some(VmDisk { size_gib, storage_tier: string(get(b, "storage_tier")) })
}

/// The boot disk the plan asks for.
pub(crate) fn planned_boot_disk(planned: &Value) -> Option<VmDisk> {
    disk(get(planned, "boot_disk"))
}

/// The additional disks the plan asks for.
pub(crate) fn planned_additional_disks(planned: &Value) -> Vec<VmDisk> {
    let Value::Array(blocks) = get(planned, "additional_disk") else { return Vec::new() };
    blocks.iter().filter_map(disk).collect()
}

/// Whether the boot disk changes in a way that replaces the VM: smaller,
/// or in another tier.
pub(crate) fn boot_disk_replaces(prior: &Value, planned: &Value) -> bool {
    match (planned_boot_disk(prior), planned_boot_disk(planned)) {
        (Some(a), Some(b)) => b.size_gib < a.size_gib || a.storage_tier != b.storage_tier,
        (None, None) => false,
        // Given or removed: the template's size is not known here.
        _ => true,
    }
}

fn block_state(d: &VmDisk) -> Value {
    object(vec![("size_gib", Value::from(d.size_gib)), ("storage_tier", value::opt_string(d.storage_tier.as_deref()))])
}

/// The two blocks' state, from the VM.
pub(crate) fn disks_state(vm: &VirtualMachine) -> [(&'static str, Value); 2] {
    [
        ("boot_disk", vm.spec.boot_disk.as_ref().map(block_state).unwrap_or(Value::Nil)),
        ("additional_disk", Value::Array(vm.spec.additional_disks.iter().map(block_state).collect())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk_value(size: u64, tier: Option<&str>) -> Value {
        object(vec![("size_gib", Value::from(size)), ("storage_tier", value::opt_string(tier))])
    }

    #[test]
    fn growing_stays_in_place_and_the_rest_replaces() {
        let plan = |d: Value| object(vec![("boot_disk", d)]);
        let small = plan(disk_value(20, None));
        assert!(!boot_disk_replaces(&small, &plan(disk_value(30, None))));
        assert!(boot_disk_replaces(&plan(disk_value(30, None)), &small));
        assert!(boot_disk_replaces(&small, &plan(disk_value(20, Some("fast")))));
        assert!(boot_disk_replaces(&small, &plan(Value::Nil)));
        assert!(!boot_disk_replaces(&plan(Value::Nil), &plan(Value::Nil)));
        let planned = object(vec![("additional_disk", Value::Array(vec![disk_value(5, Some("archive"))]))]);
        assert_eq!(planned_additional_disks(&planned), [VmDisk { size_gib: 5, storage_tier: Some("archive".into()) }]);
        assert_eq!(planned_boot_disk(&small), Some(VmDisk { size_gib: 20, storage_tier: None }));
    }
}
