//! Snapshots on a cluster: a KubeVirt `VirtualMachineSnapshot` of the VM's
//! KubeVirt VM, in its namespace (KubeVirt snapshots its volumes through
//! CSI, freezing the guest's file systems when its agent answers). Its
//! status is watched; deleting the snapshot deletes it and its content.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use vmaas_backend::{BackendError, Cleanup, Driver, Requeue, SnapshotObservation, SnapshotSpec, SnapshotTarget, Taken};
use vmaas_model::k8s::snapshot::{SnapshotSeen, observe_vm_snapshot, vm_snapshot};
use vmaas_model::snapshot::SnapshotConsistency;
use vmaas_model::{ObjectKind, SnapshotDisk};

use crate::cluster::{as_json, place_of};
use crate::names::labels;
use crate::shared::Shared;

/// The driver of snapshots.
pub struct Snapshots(pub(crate) Arc<Shared>);

/// What the backend reports of a `VirtualMachineSnapshot` KubeVirt says is ready.
fn taken(online: bool, frozen: bool, volumes: Vec<String>, taken_at: Option<chrono::DateTime<chrono::Utc>>) -> Taken {
    let consistency = match (online, frozen) {
        (false, _) => SnapshotConsistency::Stopped,
        (true, true) => SnapshotConsistency::FilesystemFrozen,
        (true, false) => SnapshotConsistency::CrashConsistent,
    };
    // The sizes are the CSI snapshots' (KubeVirt does not report them).
    let disks = volumes.into_iter().map(|name| SnapshotDisk { name, size_bytes: 0 }).collect();
    Taken { online, consistency, disks, taken_at: taken_at.unwrap_or_else(chrono::Utc::now) }
}

#[async_trait]
impl Driver<SnapshotSpec, SnapshotObservation> for Snapshots {
    async fn ensure(&self, t: &SnapshotTarget) -> Result<(SnapshotObservation, Requeue), BackendError> {
        let s = &self.0;
        s.listed()?;
        let seen = s.snapshots.of(&t.id).into_iter().next();
        if seen.is_none() {
            let Some(vm) = s.vms.of(&t.spec.vm).into_iter().next() else {
                let why = "waiting for the virtual machine on the cluster".to_owned();
                return Ok((SnapshotObservation::Pending(why), Requeue::after(Duration::from_secs(2))));
            };
            let (ns, name) = place_of(&vm);
            let mut obj = vm_snapshot(&t.id, &ns, &name);
            obj["metadata"]["labels"] = json!(labels(ObjectKind::ComputeInstanceSnapshot, &t.id));
            s.cluster.apply(&s.cluster.res.vm_snapshot, &obj).await?;
        }
        let now = s.snapshots.of(&t.id).into_iter().next().map(|o| as_json(&o));
        Ok(match observe_vm_snapshot(now.as_ref()) {
            SnapshotSeen::Ready { online, frozen, volumes, taken_at } => {
                (SnapshotObservation::Ready(taken(online, frozen, volumes, taken_at)), Requeue::AwaitChange)
            }
            SnapshotSeen::Pending(m) => (SnapshotObservation::Pending(m), Requeue::after(Duration::from_secs(15))),
            SnapshotSeen::Failed(m) => (SnapshotObservation::Failed(m), Requeue::AwaitChange),
        })
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        let left = s.cluster.delete_all_of(&s.cluster.res.vm_snapshot, id).await?;
        Ok(if left == 0 { Cleanup::Done } else { Cleanup::InProgress })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistency_follows_kubevirts_indications() {
        assert_eq!(taken(true, true, vec![], None).consistency, SnapshotConsistency::FilesystemFrozen);
        assert_eq!(taken(true, false, vec![], None).consistency, SnapshotConsistency::CrashConsistent);
        assert_eq!(taken(false, false, vec!["rootdisk".into()], None).disks[0].name, "rootdisk");
    }
}
