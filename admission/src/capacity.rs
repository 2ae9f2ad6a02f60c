//! Capacity checks at create and change: what VMs ask for (CPU, memory,
//! disk) against what the host can give, with configurable overcommit. A
//! request that does not fit is RESOURCE_EXHAUSTED, naming the resource,
//! before anything is stored.

use vmaas_backend::HostCapacity;
use vmaas_model::ObjectKind;

use vmaas_store::{Store, StoreError};

use crate::AdmissionError;

/// How far the sum of what VMs ask for may exceed what the host has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overcommit {
    /// Virtual CPUs per host CPU, over running VMs.
    pub cpu: f64,
    /// Memory promised per byte of host memory, over running VMs.
    pub memory: f64,
    /// Disk capacity promised per byte of the file system holding the disks
    /// (copy-on-write disks only take what is written), over every VM.
    pub disk: f64,
}

impl Default for Overcommit {
    fn default() -> Self {
        Self { cpu: 16.0, memory: 1.5, disk: 2.0 }
    }
}

pub use vmaas_store::usage::HostUsage as Usage;

/// What the VMs (but the VM `except_vm`) and the volumes (but the volume
/// `except_volume`) hold of the host now, as the store counts it: volumes
/// live on the same file system as the VMs' disks.
pub async fn held(store: &Store, except_vm: Option<&str>, except_volume: Option<&str>) -> Result<Usage, StoreError> {
    let mut held = store.host_usage().await?;
    for (kind, id) in [(ObjectKind::VirtualMachine, except_vm), (ObjectKind::Volume, except_volume)] {
        if let Some(id) = id {
            held = held.minus(store.host_usage_of(kind, id).await?);
        }
    }
    Ok(held)
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
}

fn scaled(v: u64, factor: f64) -> u64 {
    (v as f64 * factor.max(0.0)).min(u64::MAX as f64) as u64
}

/// Whether `asked` fits beside `used` on `host`; else RESOURCE_EXHAUSTED naming the resource.
pub fn check(host: &HostCapacity, over: &Overcommit, used: Usage, asked: Usage) -> Result<(), AdmissionError> {
    let cpu_limit = scaled(u64::from(host.cpus), over.cpu);
    if used.cpus.saturating_add(asked.cpus) > cpu_limit {
        return Err(AdmissionError::exhausted(
            "cpu",
            format!(
                "{} more virtual CPUs do not fit: {} of {cpu_limit} ({} CPUs × {} overcommit) are promised",
                asked.cpus, used.cpus, host.cpus, over.cpu
            ),
        ));
    }
    if host.memory_bytes > 0 {
        if asked.memory_bytes > host.memory_bytes {
            return Err(AdmissionError::exhausted(
                "memory",
                format!("the VM asks for {} of memory; this host has {}", gib(asked.memory_bytes), gib(host.memory_bytes)),
            ));
        }
        let limit = scaled(host.memory_bytes, over.memory);
        if used.memory_bytes.saturating_add(asked.memory_bytes) > limit {
            return Err(AdmissionError::exhausted(
                "memory",
                format!(
                    "{} more memory does not fit: {} of {} (× {} overcommit) is promised",
                    gib(asked.memory_bytes),
                    gib(used.memory_bytes),
                    gib(limit),
                    over.memory
                ),
            ));
        }
    }
    if host.disk_bytes > 0 {
        let limit = scaled(host.disk_bytes, over.disk);
        if used.disk_bytes.saturating_add(asked.disk_bytes) > limit {
            return Err(AdmissionError::exhausted(
                "disk",
                format!(
                    "{} of disk does not fit: the disks' file system holds {}, {} may be promised (× {} overcommit), {} is promised already",
                    gib(asked.disk_bytes),
                    gib(host.disk_bytes),
                    gib(limit),
                    over.disk,
                    gib(used.disk_bytes)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const HOST: HostCapacity = HostCapacity { cpus: 2, memory_bytes: 24 * GIB, disk_bytes: 69 * GIB };

    fn usage(cpus: u64, mem_gib: u64, disk_gib: u64) -> Usage {
        Usage { cpus, memory_bytes: mem_gib * GIB, disk_bytes: disk_gib * GIB }
    }

    fn field(r: Result<(), AdmissionError>) -> String {
        match r.expect_err("refused") {
            AdmissionError::Exhausted { field, .. } => field,
            other => panic!("not RESOURCE_EXHAUSTED: {other}"),
        }
    }

    #[test]
    fn names_the_resource_that_does_not_fit() {
        let o = Overcommit::default();
        assert!(check(&HOST, &o, usage(0, 0, 0), usage(2, 1, 10)).is_ok());
        assert_eq!(field(check(&HOST, &o, usage(0, 0, 0), usage(0, 0, 100 * 1024))), "disk", "a 100Ti disk on a 69 GiB host");
        assert!(check(&HOST, &o, usage(0, 0, 0), usage(4, 4, 30)).is_ok(), "seed 000's VM: more cores than the host, within overcommit");
        assert_eq!(field(check(&HOST, &o, usage(0, 0, 0), usage(512, 1, 1))), "cpu", "beyond what overcommit allows");
        assert_eq!(field(check(&HOST, &o, usage(31, 0, 0), usage(2, 1, 1))), "cpu", "beyond 16× of 2 CPUs");
        assert_eq!(field(check(&HOST, &o, usage(0, 0, 0), usage(1, 25, 1))), "memory");
        assert_eq!(field(check(&HOST, &o, usage(0, 30, 0), usage(1, 8, 1))), "memory", "beyond 1.5× of 24 GiB");
        assert!(check(&HOST, &o, usage(0, 30, 0), usage(1, 6, 1)).is_ok());
        assert_eq!(field(check(&HOST, &o, usage(0, 0, 130), usage(1, 1, 10))), "disk", "beyond 2× of 69 GiB");
    }
}
