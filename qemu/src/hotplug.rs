//! Volumes on a VM. A VM starts with the volumes its spec lists (on its
//! command line); while it runs, a volume added to the list is hotplugged
//! (QMP `blockdev-add`, then `device_add` with the volume's serial), and
//! one taken off is hot-unplugged (`device_del`): the guest acknowledges
//! by releasing the device, which then leaves `/machine/peripheral`, and
//! only then is its block node deleted and the volume reported gone.
//! Until then it is `Detaching`, and the VM is looked at again soon.
//! A volume that grew is resized in place (`block_resize`): the guest sees
//! the new size at once.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tracing::{info, warn};
use vmaas_backend::{BackendError, DiskPresence, VmTarget, VolumeDisk, VolumePresence};

use crate::argv::{VolumeArg, volume_device, volume_node};
use crate::qmp::{Qmp, QmpError};
use crate::state::PluggedVolume;
use crate::vm::Vm;
use crate::volumes::{Volumes, grow_file};

/// How soon a VM with a volume being unplugged is looked at again.
pub(crate) const UNPLUG_STEP: Duration = Duration::from_millis(100);

impl PluggedVolume {
    pub(crate) fn of(d: &VolumeDisk) -> Self {
        Self { volume: d.volume.clone(), serial: d.serial.clone(), size_bytes: d.size_bytes }
    }
}

/// Why volumes could not be put on or taken off a running VM.
#[derive(Debug, thiserror::Error)]
pub enum HotplugError {
    /// QEMU's monitor failed.
    #[error("{context}: {source}")]
    Qmp {
        /// What was being done.
        context: &'static str,
        /// Why.
        source: QmpError,
    },
    /// The VM's state file could not be written.
    #[error(transparent)]
    State(#[from] BackendError),
}

impl From<HotplugError> for BackendError {
    fn from(e: HotplugError) -> Self {
        match e {
            HotplugError::State(e) => e,
            e => BackendError::transient("putting volumes on the VM", e),
        }
    }
}

fn qmp_error(context: &'static str) -> impl FnOnce(QmpError) -> HotplugError {
    move |source| HotplugError::Qmp { context, source }
}

/// The ids of the volume devices QEMU has now.
async fn devices(q: &mut Qmp) -> Result<BTreeSet<String>, QmpError> {
    let list = q.execute("qom-list", Some(json!({"path": "/machine/peripheral"}))).await?;
    let names = list.as_array().into_iter().flatten().filter_map(|e| e["name"].as_str());
    Ok(names.filter(|n| n.starts_with("vol-")).map(str::to_owned).collect())
}

/// Plugs `arg` in: its block node (kept if an earlier try made it), then its device.
async fn plug(q: &mut Qmp, arg: &VolumeArg) -> Result<(), QmpError> {
    match q.execute("blockdev-add", Some(arg.blockdev())).await {
        Ok(_) => {}
        Err(QmpError::Command { desc, .. }) if desc.contains("Duplicate") || desc.contains("already") => {}
        Err(e) => return Err(e),
    }
    if let Err(e) = q.execute("device_add", Some(arg.device_json())).await {
        let _ = q.execute("blockdev-del", Some(json!({"node-name": arg.node()}))).await;
        return Err(e);
    }
    Ok(())
}

/// Volumes on VMs: their files, and their devices in running QEMUs.
#[derive(Clone)]
pub(crate) struct Plugs {
    /// Where volume files are.
    volume_dir: PathBuf,
    /// `qemu-img`, which grows a volume's file before a boot.
    qemu_img: PathBuf,
}

impl Plugs {
    /// Volumes whose files are in `volume_dir`.
    pub(crate) fn new(volume_dir: PathBuf, qemu_img: PathBuf) -> Self {
        Self { volume_dir, qemu_img }
    }

    /// Volume `volume` as a disk with `serial`.
    pub(crate) fn volume_arg(&self, volume: &str, serial: &str) -> VolumeArg {
        VolumeArg { serial: serial.to_owned(), file: Volumes::path(&self.volume_dir, volume) }
    }

    /// The volumes a VM starts with: each listed volume whose file is
    /// there, grown to its size. One that cannot be used is left out (the
    /// running VM's first step tries to plug it and reports why it fails).
    pub(crate) async fn at_boot(&self, t: &VmTarget) -> (Vec<VolumeArg>, Vec<PluggedVolume>) {
        let (mut args, mut plugged) = (Vec::new(), Vec::new());
        for d in &t.spec.volumes {
            let arg = self.volume_arg(&d.volume, &d.serial);
            if let Err(m) = grow_file(&self.qemu_img, &arg.file, d.size_bytes).await {
                warn!(vm = %t.id, volume = %d.volume, error = %m, "volume left out of the boot");
                continue;
            }
            plugged.push(PluggedVolume::of(d));
            args.push(arg);
        }
        (args, plugged)
    }

    /// Where the volumes of a VM that does not run are: each listed one
    /// is attached (it is on the VM's next start), unless its file is gone.
    async fn presence_at_rest(&self, t: &VmTarget) -> VolumePresence {
        let mut out = VolumePresence::new();
        for d in &t.spec.volumes {
            let there = tokio::fs::try_exists(self.volume_arg(&d.volume, &d.serial).file).await.unwrap_or(false);
            let p = if there { DiskPresence::Attached } else { DiskPresence::Failed("its disk file is missing".into()) };
            out.insert(d.volume.clone(), p);
        }
        out
    }

    /// Puts the volumes `t` lists on `vm` and takes the others away, one
    /// step; where each is, and whether an unplug is under way.
    pub(crate) async fn sync(&self, vm: &mut Vm, t: &VmTarget) -> Result<(VolumePresence, bool), HotplugError> {
        if !vm.is_running() {
            vm.file.volumes.clear();
            return Ok((self.presence_at_rest(t).await, false));
        }
        let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(qmp_error("connecting to QMP"))?;
        let present = devices(&mut q).await.map_err(qmp_error("listing devices"))?;
        let before = vm.file.volumes.clone();
        let mut presence = VolumePresence::new();
        for d in &t.spec.volumes {
            let p = self.ensure_plugged(&mut q, vm, d, &present).await;
            presence.insert(d.volume.clone(), p);
        }
        let wanted: BTreeSet<String> = t.spec.volumes.iter().map(|d| self.volume_arg(&d.volume, &d.serial).device()).collect();
        let mut busy = false;
        for dev in present.difference(&wanted) {
            if let Some(v) = vm.file.volumes.iter().find(|v| volume_device(&v.serial) == *dev) {
                presence.insert(v.volume.clone(), DiskPresence::Detaching);
            }
            // Asked again each step: QEMU refuses a second request while one is under way.
            if let Err(e) = q.execute("device_del", Some(json!({"id": dev}))).await {
                tracing::debug!(vm = %t.id, device = %dev, error = %e, "device_del");
            }
            busy = true;
        }
        self.forget_unplugged(&mut q, vm, &present, &wanted).await;
        if vm.file.volumes != before {
            vm.file.save(&vm.dir).await?;
        }
        Ok((presence, busy))
    }

    /// Makes sure the running QEMU has volume `d` at its size.
    async fn ensure_plugged(&self, q: &mut Qmp, vm: &mut Vm, d: &VolumeDisk, present: &BTreeSet<String>) -> DiskPresence {
        let arg = self.volume_arg(&d.volume, &d.serial);
        if !present.contains(&arg.device()) {
            if let Err(m) = plug(q, &arg).await {
                warn!(vm = %vm.file.id, volume = %d.volume, error = %m, "hotplug failed");
                return DiskPresence::Failed(format!("hotplug failed: {m}"));
            }
            info!(vm = %vm.file.id, volume = %d.volume, serial = %d.serial, "volume hotplugged");
            vm.file.volumes.retain(|v| v.serial != d.serial);
            vm.file.volumes.push(PluggedVolume::of(d));
            return DiskPresence::Attached;
        }
        let Some(known) = vm.file.volumes.iter_mut().find(|v| v.serial == d.serial) else {
            vm.file.volumes.push(PluggedVolume::of(d));
            return DiskPresence::Attached;
        };
        if d.size_bytes > known.size_bytes {
            match q.execute("block_resize", Some(json!({"node-name": arg.node(), "size": d.size_bytes}))).await {
                Ok(_) => {
                    info!(vm = %vm.file.id, volume = %d.volume, from = known.size_bytes, to = d.size_bytes, "volume grown in place");
                    known.size_bytes = d.size_bytes;
                }
                Err(e) => warn!(vm = %vm.file.id, volume = %d.volume, error = %e, "growing a plugged volume failed; will retry"),
            }
        }
        DiskPresence::Attached
    }

    /// Deletes the block nodes of volumes whose device the guest let go of.
    async fn forget_unplugged(&self, q: &mut Qmp, vm: &mut Vm, present: &BTreeSet<String>, wanted: &BTreeSet<String>) {
        let gone: Vec<PluggedVolume> = vm
            .file
            .volumes
            .iter()
            .filter(|v| {
                let dev = volume_device(&v.serial);
                !present.contains(&dev) && !wanted.contains(&dev)
            })
            .cloned()
            .collect();
        for v in gone {
            let node = volume_node(&v.serial);
            if let Err(e) = q.execute("blockdev-del", Some(json!({"node-name": node}))).await {
                tracing::debug!(vm = %vm.file.id, node = %node, error = %e, "blockdev-del");
            }
            vm.file.volumes.retain(|x| x.serial != v.serial);
            info!(vm = %vm.file.id, volume = %v.volume, "volume unplugged: the guest released it");
        }
    }
}
