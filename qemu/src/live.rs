//! What a QEMU is started with to grow live, and what growth it allows:
//! `-smp N,maxcpus=M`, `-m BOOT,maxmem=MAX` and an empty `virtio-mem`
//! device (the steps that grow a running guest are in `resize`).

use serde::{Deserialize, Serialize};
use vmaas_model::MachineSpec;

/// The virtio-mem device's id.
pub const VMEM: &str = "vmem0";
/// Its memory backend's id.
const VMEM_BACKEND: &str = "vmem-ram";

/// What a QEMU was started with to be resized live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveArgs {
    /// `maxcpus`.
    pub max_cpus: u32,
    /// The memory QEMU booted with, in MiB (virtio-mem adds to it).
    pub boot_memory_mib: u64,
    /// The virtio-mem region in MiB (0: memory is not resized live).
    pub region_mib: u64,
}

impl LiveArgs {
    /// The limits of `spec` for a QEMU booting `spec`'s shape; `None`
    /// without limits.
    pub fn of(spec: &MachineSpec) -> Option<Self> {
        if spec.live.is_empty() {
            return None;
        }
        let boot_memory_mib = spec.memory_bytes().div_ceil(1 << 20);
        let max_mib = spec.live.max_memory_bytes().map(|b| b.div_ceil(1 << 20)).unwrap_or(boot_memory_mib);
        Some(Self {
            max_cpus: spec.live.max_cpu_cores.unwrap_or(spec.cpu.cores).max(spec.cpu.cores),
            boot_memory_mib,
            region_mib: max_mib.saturating_sub(boot_memory_mib),
        })
    }

    /// `-smp`'s value for `cpus` vCPUs.
    pub fn smp(&self, cpus: u32) -> String {
        format!("cpus={cpus},maxcpus={}", self.max_cpus)
    }

    /// `-m`'s value.
    pub fn memory(&self) -> String {
        if self.region_mib == 0 {
            format!("{}M", self.boot_memory_mib)
        } else {
            format!("{}M,maxmem={}M", self.boot_memory_mib, self.boot_memory_mib + self.region_mib)
        }
    }

    /// The virtio-mem device and its backend, plugged empty.
    pub fn devices(&self) -> Vec<String> {
        if self.region_mib == 0 {
            return Vec::new();
        }
        vec![
            "-object".into(),
            format!("memory-backend-ram,id={VMEM_BACKEND},size={}M", self.region_mib),
            "-device".into(),
            format!("virtio-mem-pci,id={VMEM},memdev={VMEM_BACKEND},requested-size=0"),
        ]
    }

    /// What a guest of `cpus` vCPUs and `memory_mib` would need: the vCPUs
    /// to add and virtio-mem's new requested size in bytes, or why it
    /// needs a restart.
    pub fn plan(&self, now_cpus: u32, now_mib: u64, cpus: u32, memory_mib: u64) -> Result<Plan, Later> {
        if cpus < now_cpus {
            return Err(Later::FewerCpus { now: now_cpus, wanted: cpus });
        }
        if cpus > self.max_cpus {
            return Err(Later::MoreCpus { wanted: cpus, max: self.max_cpus });
        }
        if memory_mib < now_mib {
            return Err(Later::LessMemory { now_mib, wanted_mib: memory_mib });
        }
        if memory_mib > self.boot_memory_mib + self.region_mib {
            return Err(Later::MoreMemory { wanted_mib: memory_mib, max_mib: self.boot_memory_mib + self.region_mib });
        }
        Ok(Plan { add_cpus: cpus - now_cpus, requested_bytes: (memory_mib - self.boot_memory_mib) << 20 })
    }
}

/// One live resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// vCPUs to add.
    pub add_cpus: u32,
    /// virtio-mem's requested size.
    pub requested_bytes: u64,
}

/// Why a new shape waits for a restart instead of growing live.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Later {
    /// Fewer vCPUs.
    #[error("fewer vCPUs ({now} → {wanted}) take a restart")]
    FewerCpus {
        /// vCPUs now.
        now: u32,
        /// vCPUs asked for.
        wanted: u32,
    },
    /// More vCPUs than `maxcpus`.
    #[error("{wanted} vCPUs is more than the {max} the guest started able to take")]
    MoreCpus {
        /// vCPUs asked for.
        wanted: u32,
        /// `maxcpus`.
        max: u32,
    },
    /// Less memory.
    #[error("less memory ({now_mib}Mi → {wanted_mib}Mi) takes a restart")]
    LessMemory {
        /// MiB now.
        now_mib: u64,
        /// MiB asked for.
        wanted_mib: u64,
    },
    /// More memory than `maxmem`.
    #[error("{wanted_mib}Mi is more than the {max_mib}Mi the guest started able to take")]
    MoreMemory {
        /// MiB asked for.
        wanted_mib: u64,
        /// `maxmem` in MiB.
        max_mib: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cores: u32, memory: &str, max_cores: Option<u32>, max_memory: Option<&str>) -> MachineSpec {
        let mut m = MachineSpec::default();
        m.cpu.cores = cores;
        m.memory = memory.parse().unwrap();
        m.live.max_cpu_cores = max_cores;
        m.live.max_memory = max_memory.map(|q| q.parse().unwrap());
        m
    }

    #[test]
    fn limits_become_maxcpus_maxmem_and_an_empty_virtio_mem() {
        assert_eq!(LiveArgs::of(&spec(1, "256Mi", None, None)), None, "no limits: nothing live");
        let l = LiveArgs::of(&spec(1, "256Mi", Some(4), Some("1Gi"))).unwrap();
        assert_eq!((l.smp(1), l.memory()), ("cpus=1,maxcpus=4".to_owned(), "256M,maxmem=1024M".to_owned()));
        assert_eq!(
            l.devices(),
            ["-object", "memory-backend-ram,id=vmem-ram,size=768M", "-device", "virtio-mem-pci,id=vmem0,memdev=vmem-ram,requested-size=0"]
        );
        let cpus_only = LiveArgs::of(&spec(2, "256Mi", Some(4), None)).unwrap();
        assert_eq!((cpus_only.memory(), cpus_only.devices().len()), ("256M".to_owned(), 0));
    }

    #[test]
    fn growth_is_live_and_the_rest_waits_for_a_restart() {
        let l = LiveArgs::of(&spec(1, "256Mi", Some(2), Some("1Gi"))).unwrap();
        assert_eq!(l.plan(1, 256, 2, 512).unwrap(), Plan { add_cpus: 1, requested_bytes: 256 << 20 });
        assert_eq!(l.plan(2, 512, 1, 512).unwrap_err(), Later::FewerCpus { now: 2, wanted: 1 });
        assert!(l.plan(2, 512, 1, 512).unwrap_err().to_string().contains("fewer vCPUs"));
        assert!(l.plan(1, 512, 1, 256).unwrap_err().to_string().contains("less memory"));
        assert!(l.plan(1, 256, 3, 256).unwrap_err().to_string().contains("more than the 2"));
        assert!(l.plan(1, 256, 1, 2048).unwrap_err().to_string().contains("more than the 1024Mi"));
    }
}
