//! What a backend holds on its host, apart from the objects it was asked to
//! run: the resources that belong to no stored object (kept, not deleted),
//! and what the host can give new VMs.

use serde::Serialize;
use vmaas_model::ObjectKind;

/// A resource on the host that belongs to no stored object. It is kept as
/// it is (a guest keeps running, a disk stays) until an administrator
/// restores the store or removes it (`vmaas-server gc`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quarantined {
    /// What it would be.
    pub kind: ObjectKind,
    /// Its id, as the backend knows it.
    pub id: String,
    /// Its name and tenant, when the host state still says.
    pub name: Option<String>,
    /// Its tenant, when the host state still says.
    pub tenant: Option<String>,
    /// Whether a guest still runs.
    pub running: bool,
    /// Where it is on the host.
    pub path: String,
}

/// What one running VM costs the host in memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmMemory {
    /// The VM's id.
    pub id: String,
    /// Resident bytes of its process (shared pages included).
    pub resident_bytes: u64,
    /// Resident bytes no other process shares: what the host gets back
    /// when the VM goes.
    pub unique_bytes: u64,
}

/// What the host can give VMs, before overcommit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostCapacity {
    /// Logical CPUs.
    pub cpus: u32,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Size of the file system holding the disks, in bytes.
    pub disk_bytes: u64,
}

/// What a cluster (or this host) has for VMs, for placing them among several.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Room {
    /// CPU, in thousandths of a core: all of it, and what vmaas's VMs ask.
    pub cpu_millis: Usage,
    /// Memory in bytes: all of it, and what vmaas's VMs ask.
    pub memory_bytes: Usage,
    /// Devices (GPUs) by resource name, e.g. `nvidia.com/GA102GL_A10`.
    pub devices: std::collections::BTreeMap<String, Usage>,
}

/// How much of something there is, and how much is asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// All of it.
    pub total: u64,
    /// What vmaas's VMs ask for.
    pub used: u64,
}

impl Usage {
    /// What is left.
    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.used)
    }
}

impl Room {
    /// What VM `machine` asks of a cluster: CPU (millicores), memory, devices.
    pub fn demand(machine: &vmaas_model::MachineSpec) -> Demand {
        let mut devices = std::collections::BTreeMap::new();
        for g in &machine.gpus {
            *devices.entry(g.device_name.clone()).or_insert(0) += 1;
        }
        Demand { cpu_millis: u64::from(machine.cpu.vcpus()) * 1000, memory_bytes: machine.memory.to_units_ceil().unwrap_or(0), devices }
    }

    /// Why `d` does not fit, if it does not.
    pub fn lacks(&self, d: &Demand) -> Option<String> {
        if self.cpu_millis.free() < d.cpu_millis {
            return Some(format!("{} of {} CPU millicores free, {} asked", self.cpu_millis.free(), self.cpu_millis.total, d.cpu_millis));
        }
        if self.memory_bytes.free() < d.memory_bytes {
            return Some(format!("{} MiB of memory free, {} MiB asked", self.memory_bytes.free() >> 20, d.memory_bytes >> 20));
        }
        d.devices.iter().find_map(|(name, n)| {
            let free = self.devices.get(name).map_or(0, Usage::free);
            (free < *n).then(|| format!("{free} {name} free, {n} asked"))
        })
    }

    /// Takes `d` from what is free.
    pub fn take(&mut self, d: &Demand) {
        self.cpu_millis.used += d.cpu_millis;
        self.memory_bytes.used += d.memory_bytes;
        for (name, n) in &d.devices {
            self.devices.entry(name.clone()).or_default().used += n;
        }
    }
}

/// What one VM asks of a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    /// CPU in thousandths of a core.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Devices by resource name.
    pub devices: std::collections::BTreeMap<String, u64>,
}
