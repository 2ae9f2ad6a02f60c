//! Snapshots of a VM's disks, and restores from them, over the VMs of
//! this host: which files a VM's disks are ([`sources`]), the snapshot
//! driver (taken under the VM's lock, so that no boot, stop or hotplug
//! runs meanwhile), and the restore step of a VM's reconcile.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, CloneFrom, Driver, Requeue, SnapshotObservation, SnapshotSpec, SnapshotTarget, VmTarget};
use vmaas_model::Reason;

use crate::Vms;
use crate::argv::{disk_node, volume_node};
use crate::disk_snapshots::{Online, SnapshotError, Source};
use crate::vm::Vm;
use crate::volumes::Volumes;

/// How soon a snapshot of a VM that has no disks yet is looked at again.
const WAIT: Duration = Duration::from_secs(1);

impl From<SnapshotError> for BackendError {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::Missing(_) => BackendError::invalid("restoring a snapshot", e),
            e => BackendError::transient("taking a snapshot", e),
        }
    }
}

/// The disks of a VM of `machine` with `volumes` on it, as a snapshot takes them.
fn sources(vms: &Vms, vm: &Vm, machine: &[vmaas_model::Disk], volumes: &[vmaas_backend::VolumeDisk]) -> Vec<Source> {
    let own = machine.iter().map(|d| Source { name: d.name.clone(), file: vm.disk_file(d), node: disk_node(&d.name) });
    let attached = volumes.iter().map(|v| Source {
        name: format!("volume:{}", v.volume),
        file: Volumes::path(&vms.volume_dir(), &v.volume),
        node: volume_node(&v.serial),
    });
    own.chain(attached).collect()
}

/// How an online copy reaches `vm`'s QEMU: none when its guest is not running.
fn online(vm: &Vm) -> Option<Online> {
    vm.running().map(|_| Online { qmp: vm.path("qmp.sock"), agent: vm.path(crate::agent::SOCKET) })
}

/// The snapshot driver of the qemu backend.
pub(crate) struct SnapshotDriver(pub(crate) Arc<Vms>);

#[async_trait]
impl Driver<SnapshotSpec, SnapshotObservation> for SnapshotDriver {
    async fn ensure(&self, t: &SnapshotTarget) -> Result<(SnapshotObservation, Requeue), BackendError> {
        let vms = &self.0;
        if let Some(taken) = vms.snapshots.taken(&t.id).await {
            return Ok((SnapshotObservation::Ready(taken), Requeue::AwaitChange));
        }
        let Some(h) = vms.handle(&t.spec.vm) else {
            let why = "the virtual machine has not started yet: it has no disks to take".to_owned();
            return Ok((SnapshotObservation::Pending(why), Requeue::after(WAIT)));
        };
        let vm = h.lock().await;
        let sources = sources(vms, &vm, &t.spec.disks, &t.spec.volumes);
        for s in &sources {
            if !tokio::fs::try_exists(&s.file).await.unwrap_or(false) {
                let why = format!("disk {} is not made yet: the virtual machine has not started", s.name);
                return Ok((SnapshotObservation::Pending(why), Requeue::after(WAIT)));
            }
        }
        let taken = vms.snapshots.take(&t.id, &sources, online(&vm).as_ref()).await?;
        Ok((SnapshotObservation::Ready(taken), Requeue::AwaitChange))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.0.snapshots.remove(id).await.map_err(|e| BackendError::transient("removing a snapshot", e))?;
        Ok(Cleanup::Done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        self.0.snapshots.retain(known).await.map_err(|e| BackendError::transient("removing snapshots that are gone", e))
    }
}

impl Vms {
    /// Makes the disks of a clone from its source before its first start
    /// (a clone whose disks are made already has nothing to do): a
    /// snapshot's files copied, or a VM's disks copied at one instant
    /// (online while it runs, under its lock). Each disk of the clone's
    /// machine takes the source's disk of the same name (the image's disk
    /// takes the image's); one the source lacks starts as its template says.
    pub(crate) async fn clone_disks(&self, vm: &Vm, t: &VmTarget) -> Result<(), Reason> {
        let Some(from) = &t.spec.clone_from else { return Ok(()) };
        let own = sources(self, vm, &t.spec.machine.disks, &[]);
        for d in &own {
            if tokio::fs::try_exists(&d.file).await.unwrap_or(true) {
                return Ok(());
            }
        }
        let failed = |e: String| Reason::new("CloneFailed", e);
        match from {
            CloneFrom::Snapshot(id) => {
                let dests: Vec<(String, PathBuf)> = own.into_iter().map(|d| (d.name, d.file)).collect();
                let copied = self.snapshots.restore(id, &dests).await.map_err(|e| failed(format!("copying snapshot {id}: {e}")))?;
                info!(vm = %t.id, snapshot = %id, disks = ?copied, "clone made from a snapshot");
            }
            CloneFrom::Vm(id) => {
                let h =
                    self.handle(id).ok_or_else(|| failed(format!("virtual machine {id} has not started yet: it has no disks to copy")))?;
                let src = h.lock().await;
                let (sources, targets): (Vec<Source>, Vec<PathBuf>) = sources(self, &src, &t.spec.machine.disks, &[])
                    .into_iter()
                    .zip(own)
                    .filter(|(s, _)| s.file.exists())
                    .map(|(s, d)| (s, d.file.with_extension("qcow2.cloning")))
                    .unzip();
                let on = online(&src);
                self.snapshots
                    .copy(&sources, &targets, on.as_ref())
                    .await
                    .map_err(|e| failed(format!("copying the disks of {id}: {e}")))?;
                for t in &targets {
                    tokio::fs::rename(t, t.with_extension(""))
                        .await
                        .map_err(|e| failed(format!("moving {} into place: {e}", t.display())))?;
                }
                info!(vm = %t.id, source = %id, online = on.is_some(), disks = sources.len(), "clone made from a virtual machine");
            }
        }
        Ok(())
    }

    /// Carries out a restore `t` asks for and `vm` has not acted on: a
    /// running guest is stopped at once (its disks are about to be
    /// replaced), each disk the snapshot holds and the VM still has is
    /// copied back, and the restore is recorded; the rest of the reconcile
    /// starts the guest again if it should run. A snapshot that is not
    /// here fails the VM, saying so.
    pub(crate) async fn restore_step(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), Reason> {
        let (Some(snapshot), true) = (t.spec.restore_from.as_deref(), vm.restore_asked(t)) else {
            return Ok(());
        };
        if let Some(p) = vm.running() {
            info!(vm = %t.id, snapshot, "stopping the guest for a restore");
            crate::lifecycle::quit(&vm.path("qmp.sock"), &p).await;
            vm.stop_runtime();
        }
        let dests: Vec<(String, PathBuf)> =
            sources(self, vm, &t.spec.machine.disks, &t.spec.volumes).into_iter().map(|s| (s.name, s.file)).collect();
        let began = std::time::Instant::now();
        let restored = self.snapshots.restore(snapshot, &dests).await;
        vm.file.restore_ms = Some(u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX));
        vm.file.restores = t.spec.requests.restore;
        let saved = vm.file.save(&vm.dir).await;
        match (restored, saved) {
            (Ok(disks), Ok(())) => {
                info!(vm = %t.id, snapshot, ?disks, "virtual machine restored from a snapshot");
                Ok(())
            }
            (Err(e), _) => Err(Reason::new("RestoreFailed", format!("restoring snapshot {snapshot}: {e}"))),
            (_, Err(e)) => Err(Reason::new("RestoreFailed", format!("recording the restore: {e}"))),
        }
    }
}
