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
