//! Restores on a cluster: a VM's restore generation above what its KubeVirt
//! VM records is acted on by halting the VM, then a `VirtualMachineRestore`
//! from the snapshot's `VirtualMachineSnapshot` (in place: the claims keep
//! their names, so the VM renders as before), then the VM runs again if it
//! should. The generation acted on is recorded on the KubeVirt VM, so a
//! restarted server does not restore twice.

use kube::core::DynamicObject;
use serde_json::json;
use tracing::{info, warn};
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::k8s::restore::{RestoreSeen, observe_vm_restore, vm_restore, vm_restore_name};
use vmaas_model::{ObjectKind, Reason};

use crate::cluster::as_json;
use crate::names::{generation, labels};
use crate::shared::Shared;

/// The annotation of a KubeVirt VM recording the restore generation acted on.
pub(crate) const ANNOTATION: &str = "vmaas.io/restore-generation";

/// Where a VM's restore stands.
pub(crate) struct Restoring {
    /// The restore generation acted on (recorded on the KubeVirt VM).
    pub acted: u64,
    /// While one is under way (the VM is kept halted): how far it is.
    pub under_way: Option<Reason>,
}

impl Restoring {
    fn settled(acted: u64) -> Self {
        Self { acted, under_way: None }
    }
}

impl Shared {
    /// One step of the pending restore of `t` (KubeVirt VM `current` in `ns`), if any.
    pub(crate) async fn restore(&self, t: &VmTarget, ns: &str, current: Option<&DynamicObject>) -> Result<Restoring, BackendError> {
        let wanted = t.spec.requests.restore;
        let acted = current.map(|vm| generation(vm, ANNOTATION)).unwrap_or(wanted);
        let Some(snapshot) = t.spec.restore_from.as_deref().filter(|_| acted < wanted) else {
            self.forget_restores(t, acted.max(wanted)).await?;
            return Ok(Restoring::settled(acted.max(wanted)));
        };
        let under_way = |why: String| Ok(Restoring { acted, under_way: Some(Reason::new("Restoring", why)) });
        if self.vmis.get(ns, &t.name).is_some() {
            return under_way(format!("stopping the guest to restore snapshot {snapshot}"));
        }
        let name = vm_restore_name(&t.name, wanted);
        let Some(seen) = self.restores.get(ns, &name).map(|o| as_json(&o)) else {
            let Some(snap) = self.snapshots.of(snapshot).into_iter().next() else {
                let why = format!("snapshot {snapshot} has no VirtualMachineSnapshot on the cluster");
                return Ok(self.restore_failed(t, wanted, why));
            };
            let mut obj = vm_restore(&t.name, ns, snap.metadata.name.as_deref().unwrap_or_default(), wanted);
            obj["metadata"]["labels"] = json!(labels(ObjectKind::VirtualMachine, &t.id));
            self.cluster.apply(&self.cluster.res.vm_restore, &obj).await?;
            info!(vm = %t.id, snapshot, restore = %name, "restore: VirtualMachineRestore made");
            return under_way(format!("KubeVirt is restoring snapshot {snapshot}"));
        };
        match observe_vm_restore(Some(&seen)) {
            RestoreSeen::Complete(volumes) => {
                info!(vm = %t.id, snapshot, ?volumes, "virtual machine restored from a snapshot");
                self.set_refusal(&t.id, None);
                Ok(Restoring::settled(wanted))
            }
            RestoreSeen::Pending(how) => under_way(how),
            RestoreSeen::Failed(why) => Ok(self.restore_failed(t, wanted, format!("restoring snapshot {snapshot}: {why}"))),
        }
    }

    /// Gives up restore generation `generation` of `t`: the VM says why (DEGRADED).
    fn restore_failed(&self, t: &VmTarget, generation: u64, why: String) -> Restoring {
        warn!(vm = %t.id, reason = %why, "restore failed");
        self.set_refusal(&t.id, Some(Reason::new("RestoreFailed", why)));
        Restoring::settled(generation)
    }

    /// Deletes the `VirtualMachineRestore`s of `t` older than generation
    /// `latest` (the latest is kept: it says how the last restore went).
    async fn forget_restores(&self, t: &VmTarget, latest: u64) -> Result<(), BackendError> {
        let keep = vm_restore_name(&t.name, latest);
        for old in self.restores.of(&t.id) {
            if old.metadata.name.as_deref() != Some(keep.as_str()) && old.metadata.deletion_timestamp.is_none() {
                self.cluster.delete_object(&self.cluster.res.vm_restore, &old).await?;
            }
        }
        Ok(())
    }
}
