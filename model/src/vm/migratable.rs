//! Whether a running VM can live-migrate, and if not why: KubeVirt's
//! `LiveMigratable` condition, shown on every backend as the VM's
//! `LIVE_MIGRATABLE` condition while it runs. The kubevirt backend reads
//! KubeVirt's own; the qemu backend applies the same rules to what it runs
//! ([`Migratability::of_machine`]).

use chrono::{DateTime, Utc};

use super::reason::Reason;
use super::{Condition, ConditionStatus, ConditionType, VirtualMachineStatus, VmState};
use crate::MachineSpec;

/// Whether a running VM can move to another host without stopping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migratability {
    /// It can.
    Yes,
    /// It cannot, and why (KubeVirt's reasons: `HostDeviceNotLiveMigratable`,
    /// `DisksNotLiveMigratable`, `InterfaceNotLiveMigratable`).
    No(Reason),
}

impl Migratability {
    /// What the machine alone decides, on a host whose disks every QEMU of
    /// it reaches (one host): devices passed through from the host never move.
    pub fn of_machine(spec: &MachineSpec) -> Self {
        match spec.gpus.len() {
            0 => Self::Yes,
            n => Self::No(Reason::new(
                "HostDeviceNotLiveMigratable",
                format!("its {n} GPU(s) are host devices passed through to the guest (vfio-pci), which cannot move with it"),
            )),
        }
    }
}

/// The `LIVE_MIGRATABLE` condition of a VM in `state`: listed while it runs,
/// from what the backend observed, else as it was.
pub(super) fn condition(
    state: VmState,
    observed: Option<&Migratability>,
    previous: &VirtualMachineStatus,
    now: DateTime<Utc>,
) -> Option<Condition> {
    if !matches!(state, VmState::Ready | VmState::Migrating) {
        return None;
    }
    let prev = previous.condition(ConditionType::LiveMigratable);
    let Some(m) = observed else { return prev.cloned() };
    let (status, reason) = match m {
        Migratability::Yes => (ConditionStatus::True, Reason::new("Migratable", "it can move to another host without stopping its guest")),
        Migratability::No(r) => (ConditionStatus::False, r.clone()),
    };
    Some(Condition::observed(ConditionType::LiveMigratable, status, Some(reason), prev, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Gpu;

    #[test]
    fn host_devices_never_move() {
        assert_eq!(Migratability::of_machine(&MachineSpec::default()), Migratability::Yes);
        let gpu = Gpu { name: "g".into(), device_name: "nvidia.com/A10".into(), pci_device_selector: None };
        let m = MachineSpec { gpus: vec![gpu], ..MachineSpec::default() };
        assert!(matches!(Migratability::of_machine(&m), Migratability::No(r) if r.reason == "HostDeviceNotLiveMigratable"));
    }

    #[test]
    fn listed_while_running_and_kept_when_not_observed() {
        let none = VirtualMachineStatus::default();
        let now = Utc::now();
        assert!(condition(VmState::Stopped, Some(&Migratability::Yes), &none, now).is_none());
        let c = condition(VmState::Ready, Some(&Migratability::Yes), &none, now).unwrap();
        assert_eq!((c.status, c.reason.as_deref()), (ConditionStatus::True, Some("Migratable")));
        let before = VirtualMachineStatus { conditions: vec![c.clone()], ..Default::default() };
        assert_eq!(condition(VmState::Migrating, None, &before, now), Some(c));
    }
}
