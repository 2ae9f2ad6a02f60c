//! What a running guest keeps until it restarts: its CPUs, its memory and
//! the sizes of its disks. A backend records the shape it booted; when the
//! spec's shape differs, the VM reports `RESTART_REQUIRED` (OSAC's
//! condition) until a restart applies it. Disks only grow.

use serde::{Deserialize, Serialize};

use crate::machine::MachineSpec;
use crate::quantity::Quantity;

/// The restart-only part of a machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootShape {
    /// Virtual CPU cores.
    pub cpu_cores: u32,
    /// Guest memory in bytes.
    pub memory_bytes: u64,
    /// Each disk's name and size in bytes, in order.
    pub disks: Vec<(String, u64)>,
}

fn bytes(q: &Quantity) -> u64 {
    q.to_units_ceil().unwrap_or(0)
}

impl BootShape {
    /// The shape of `m`.
    pub fn of(m: &MachineSpec) -> Self {
        Self {
            cpu_cores: m.cpu.vcpus(),
            memory_bytes: m.memory_bytes(),
            disks: m.disks.iter().map(|d| (d.name.clone(), bytes(&d.size))).collect(),
        }
    }

    /// What differs in `wanted`, in words (`cpu_cores 1 → 2`); `None` when
    /// nothing does.
    pub fn pending(&self, wanted: &Self) -> Option<String> {
        let mut changes = Vec::new();
        if self.cpu_cores != wanted.cpu_cores {
            changes.push(format!("cpu_cores {} → {}", self.cpu_cores, wanted.cpu_cores));
        }
        if self.memory_bytes != wanted.memory_bytes {
            changes.push(format!("memory {} → {}", mib(self.memory_bytes), mib(wanted.memory_bytes)));
        }
        for (name, size) in &wanted.disks {
            match self.disks.iter().find(|(n, _)| n == name) {
                Some((_, was)) if was == size => {}
                Some((_, was)) => changes.push(format!("disk {name} {} → {}", mib(*was), mib(*size))),
                None => changes.push(format!("disk {name} added")),
            }
        }
        (!changes.is_empty()).then(|| changes.join(", "))
    }
}

fn mib(b: u64) -> String {
    format!("{}Mi", b.div_ceil(1 << 20))
}

/// The disks of `next` smaller than the same disk in `current`: each as
/// (disk name, size before, size asked).
pub fn shrunk_disks<'a>(current: &'a MachineSpec, next: &'a MachineSpec) -> Vec<(&'a str, &'a Quantity, &'a Quantity)> {
    next.disks
        .iter()
        .filter_map(|d| {
            let before = current.disks.iter().find(|c| c.name == d.name)?;
            (bytes(&d.size) < bytes(&before.size)).then_some((d.name.as_str(), &before.size, &d.size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cores: u32, memory: &str, disk: &str) -> MachineSpec {
        let mut m = MachineSpec::default();
        m.cpu.cores = cores;
        m.memory = memory.parse().unwrap();
        m.root_disk_mut().size = disk.parse().unwrap();
        m
    }

    #[test]
    fn equal_values_in_other_units_need_no_restart() {
        let a = BootShape::of(&machine(1, "1Gi", "10Gi"));
        assert_eq!(a.pending(&BootShape::of(&machine(1, "1024Mi", "10240Mi"))), None);
        let b = BootShape::of(&machine(2, "2Gi", "12Gi"));
        assert_eq!(a.pending(&b).unwrap(), "cpu_cores 1 → 2, memory 1024Mi → 2048Mi, disk root 10240Mi → 12288Mi");
    }

    #[test]
    fn only_smaller_disks_are_shrunk() {
        let (big, small) = (machine(1, "1Gi", "10Gi"), machine(1, "1Gi", "9Gi"));
        let s = shrunk_disks(&big, &small);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].0, s[0].1.to_string(), s[0].2.to_string()), ("root", "10Gi".into(), "9Gi".into()));
        assert!(shrunk_disks(&small, &big).is_empty());
        assert!(shrunk_disks(&big, &machine(4, "8Gi", "10240Mi")).is_empty());
    }
}
