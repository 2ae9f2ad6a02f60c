//! A VM's own disks, OSAC's `boot_disk` and `additional_disks`
//! (`ComputeInstanceDisk`: a size in GiB and a storage tier): the boot
//! disk made larger than its template makes it, and empty disks beside the
//! template's data disks. A storage tier is the storage class of the disk's
//! volume on KubeVirt; the qemu backend keeps disks as files and refuses
//! one by name.

use serde::{Deserialize, Serialize};

use crate::machine::{Disk, DiskSource, MachineSpec};
use crate::validation::{ValidationErrors, check_dns_subdomain};
use crate::{Quantity, VirtualMachineSpec};

/// Most additional disks one VM may have.
pub const MAX_ADDITIONAL_DISKS: usize = 16;

/// Largest disk a VM may ask for, in GiB (64 TiB).
pub const MAX_SIZE_GIB: u32 = 64 * 1024;

/// A disk of a VM (OSAC's `ComputeInstanceDisk`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VmDisk {
    /// Its size in GiB.
    pub size_gib: u32,
    /// Its storage tier: the storage class its volume is made in
    /// (KubeVirt; default the cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_tier: Option<String>,
}

impl VmDisk {
    /// The size as a quantity.
    fn size(&self) -> Quantity {
        Quantity::from_bytes(u64::from(self.size_gib) << 30)
    }

    /// Why this disk is refused, if it is: a size of none or beyond
    /// [`MAX_SIZE_GIB`], or a tier that cannot name a storage class.
    fn check(&self, field: &str, errs: &mut ValidationErrors) {
        if self.size_gib == 0 || self.size_gib > MAX_SIZE_GIB {
            errs.push(format!("{field}.size_gib"), format!("must be 1 to {MAX_SIZE_GIB} GiB, got {}", self.size_gib));
        }
        if let Some(Err(why)) = self.storage_tier.as_deref().map(check_dns_subdomain) {
            errs.push(format!("{field}.storage_tier"), format!("must name a storage class: {why}"));
        }
    }
}

/// The name of the `i`th additional disk in the machine (`disk1`, …).
pub fn additional_disk_name(i: usize) -> String {
    format!("disk{}", i + 1)
}

/// Applies `spec.boot_disk` and `spec.additional_disks` to the machine the
/// template resolved, naming fields under `prefix` (`object.spec`). A boot
/// disk may be larger than the template's, never smaller: the image the
/// template chose fits in that.
pub fn apply(spec: &VirtualMachineSpec, machine: &mut MachineSpec, prefix: &str, errs: &mut ValidationErrors) {
    apply_disks(spec.boot_disk.as_ref(), &spec.additional_disks, machine, prefix, errs);
}

/// [`apply`] of a boot disk and additional disks however they were asked
/// for (a VM, or a claim).
pub fn apply_disks(boot: Option<&VmDisk>, additional: &[VmDisk], machine: &mut MachineSpec, prefix: &str, errs: &mut ValidationErrors) {
    if let Some(boot) = boot {
        let field = format!("{prefix}.boot_disk");
        boot.check(&field, errs);
        let root = machine.root_disk_mut();
        let least = root.size.to_units_ceil().unwrap_or(0);
        let sized = (1..=MAX_SIZE_GIB).contains(&boot.size_gib);
        if sized && u64::from(boot.size_gib) << 30 < least {
            errs.push(
                format!("{field}.size_gib"),
                format!("must be at least the template's boot disk ({}), got {} GiB", root.size, boot.size_gib),
            );
        } else if sized {
            root.size = boot.size();
        }
        if boot.storage_tier.is_some() {
            root.storage_class = boot.storage_tier.clone();
        }
    }
    if additional.len() > MAX_ADDITIONAL_DISKS {
        let n = additional.len();
        return errs.push(format!("{prefix}.additional_disks"), format!("has {n} disks, at most {MAX_ADDITIONAL_DISKS} are allowed"));
    }
    for (i, d) in additional.iter().enumerate() {
        let field = format!("{prefix}.additional_disks[{i}]");
        d.check(&field, errs);
        let name = additional_disk_name(i);
        if machine.disks.iter().any(|x| x.name == name) {
            errs.push(field, format!("would be disk {name:?}, which the template already has; the template's data disks take other names"));
            continue;
        }
        let mut disk = Disk::new(name, d.size(), DiskSource::Blank);
        disk.storage_class = d.storage_tier.clone();
        machine.disks.push(disk);
    }
}

/// The field of `spec` that set what a backend names `backend_field` (its
/// refusal of a storage class: `disk_storage_class`, or
/// `data_disks.<name>.storage_class`), when the VM set it rather than its
/// template.
pub fn field_of(spec: &VirtualMachineSpec, backend_field: &str, prefix: &str) -> Option<String> {
    let tier = |d: &VmDisk| d.storage_tier.is_some();
    if backend_field == "disk_storage_class" {
        return spec.boot_disk.as_ref().filter(|d| tier(d)).map(|_| format!("{prefix}.boot_disk.storage_tier"));
    }
    let name = backend_field.strip_prefix("data_disks.")?.strip_suffix(".storage_class")?;
    let i = spec.additional_disks.iter().enumerate().position(|(i, d)| tier(d) && additional_disk_name(i) == name)?;
    Some(format!("{prefix}.additional_disks[{i}].storage_tier"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(size_gib: u32, tier: Option<&str>) -> VmDisk {
        VmDisk { size_gib, storage_tier: tier.map(str::to_owned) }
    }

    /// The default machine with a 1 GiB data disk `name` of its template,
    /// and the problems of applying `spec`'s disks to it.
    fn applied(name: &str, spec: &VirtualMachineSpec) -> (MachineSpec, ValidationErrors) {
        let mut m = MachineSpec::default();
        m.disks.push(Disk::new(name, Quantity::from_bytes(1 << 30), DiskSource::Blank));
        let mut errs = ValidationErrors::default();
        apply(spec, &mut m, "object.spec", &mut errs);
        (m, errs)
    }

    #[test]
    fn the_boot_disk_grows_and_additional_disks_follow_the_templates() {
        let mut spec = VirtualMachineSpec::new("t");
        spec.boot_disk = Some(disk(20, Some("fast")));
        spec.additional_disks = vec![disk(5, None), disk(7, Some("archive"))];
        let (m, errs) = applied("data0", &spec);
        assert!(errs.is_empty(), "{errs:?}");
        let root = m.root_disk().unwrap();
        assert_eq!((root.size.to_units_ceil(), root.storage_class.as_deref()), (Some(20 << 30), Some("fast")));
        let names: Vec<&str> = m.disks.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["root", "data0", "disk1", "disk2"]);
        assert_eq!((m.disks[3].size.to_units_ceil(), m.disks[3].storage_class.as_deref()), (Some(7 << 30), Some("archive")));
        assert_eq!(m.disks[3].source, DiskSource::Blank);
        assert_eq!(
            field_of(&spec, "data_disks.disk2.storage_class", "object.spec").as_deref(),
            Some("object.spec.additional_disks[1].storage_tier")
        );
        assert_eq!(field_of(&spec, "disk_storage_class", "object.spec").as_deref(), Some("object.spec.boot_disk.storage_tier"));
        assert_eq!(field_of(&spec, "data_disks.data0.storage_class", "object.spec"), None, "the template's own");
    }

    #[test]
    fn bad_disks_are_named() {
        let mut spec = VirtualMachineSpec::new("t");
        spec.boot_disk = Some(disk(5, Some("Not_A_Class")));
        spec.additional_disks = vec![disk(0, None), disk(3, None)];
        let (_, errs) = applied("disk2", &spec);
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "object.spec.boot_disk.storage_tier",
                "object.spec.boot_disk.size_gib",
                "object.spec.additional_disks[0].size_gib",
                "object.spec.additional_disks[1]"
            ]
        );
        assert!(errs.0[1].reason.contains("at least the template's boot disk (10Gi)"), "{}", errs.0[1].reason);
        spec.additional_disks = vec![disk(1, None); MAX_ADDITIONAL_DISKS + 1];
        let mut errs = ValidationErrors::default();
        apply(&spec, &mut MachineSpec::default(), "object.spec", &mut errs);
        assert!(errs.0.iter().any(|e| e.field == "object.spec.additional_disks"), "{errs:?}");
    }
}
