//! What this host can give a VM, and why it cannot run one.

use serde::Serialize;
use vmaas_model::{MachineSpec, Reason};

/// Most virtual CPUs of one VM (QEMU's `pc` machine).
pub const MAX_VCPUS: u32 = 255;

/// CPUs, memory and GPUs of the host.
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    /// Logical CPUs.
    pub cpus: u32,
    /// Memory in bytes (0 if unknown).
    pub memory_bytes: u64,
    /// GPUs bound to vfio-pci.
    pub gpus: Vec<crate::gpus::HostGpu>,
    /// The machine types QEMU knows (`-machine help`).
    pub machine_types: std::collections::BTreeSet<String>,
}

impl Host {
    /// A host of which nothing is known (one CPU, no memory limit).
    pub fn unknown() -> Self {
        Self { cpus: 1, memory_bytes: 0, gpus: Vec::new(), machine_types: Default::default() }
    }

    /// [`Host::probe`] off the async threads, its GPUs logged.
    pub async fn detect(sysfs: std::path::PathBuf, qemu: std::path::PathBuf) -> Self {
        let host = tokio::task::spawn_blocking(move || Self::probe(&sysfs, &qemu)).await.unwrap_or_else(|_| Self::unknown());
        tracing::info!(gpus = ?host.gpus, machine_types = host.machine_types.len(), "host GPUs bound to vfio-pci, QEMU's machine types");
        host
    }

    /// Reads the host's resources, its GPUs from `sysfs` and the machine
    /// types of `qemu` (blocking: call once, at start-up).
    pub fn probe(sysfs: &std::path::Path, qemu: &std::path::Path) -> Self {
        let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
            .map(|kib| kib * 1024)
            .unwrap_or(0);
        Self { cpus, memory_bytes, gpus: crate::gpus::probe(sysfs), machine_types: crate::hardware::machines(qemu) }
    }

    /// Why this host cannot run `spec`, if it cannot.
    pub fn capacity_problem(&self, spec: &MachineSpec) -> Option<Reason> {
        if !spec.gpus.is_empty() && self.gpus.len() < spec.gpus.len() {
            let asked: Vec<&str> = spec.gpus.iter().map(|g| g.device_name.as_str()).collect();
            return Some(Reason::new(
                "NoGPUAvailable",
                format!(
                    "the VM asks for {} GPU(s) ({}); this host has {} GPU(s) bound to vfio-pci",
                    spec.gpus.len(),
                    asked.join(", "),
                    self.gpus.len()
                ),
            ));
        }
        // More virtual CPUs than host CPUs run (the API bounds the total with
        // its overcommit); QEMU's `pc` machine takes at most 255.
        if spec.cpu.vcpus() > MAX_VCPUS {
            return Some(Reason::new(
                "InsufficientCPU",
                format!("the VM asks for {} vCPUs; a VM here has at most {MAX_VCPUS} (this host has {})", spec.cpu.vcpus(), self.cpus),
            ));
        }
        if self.memory_bytes > 0 && spec.memory_bytes() > self.memory_bytes {
            return Some(Reason::new(
                "InsufficientMemory",
                format!("the VM asks for {} of memory; this host has {} MiB", spec.memory, self.memory_bytes >> 20),
            ));
        }
        None
    }
}
