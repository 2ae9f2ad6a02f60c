//! Starting a VM as a clone of its template's snapshot (see
//! [`crate::snapshot`]): whether it may, the snapshot (made on first use,
//! one maker per key), and the clone's QEMU restored from it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use tracing::{info, warn};
use vmaas_backend::VmTarget;

use crate::accel::Accel;
use crate::argv::{DiskArg, QemuArgs, RamFile, UserNicArg};
use crate::images::Image;
use crate::pool::HeldPorts;
use crate::process::Process;
use crate::snapshot::{self, Identity, PLACEHOLDER_MAC, Shape, Snapshot, SnapshotError, Snapshots};

/// How a VM was started, as its status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BootPath {
    /// Restored from the snapshot of this key.
    Restored(String),
    /// Booted, for this reason.
    Cold(String),
}

impl BootPath {
    /// The words the VM's Ready condition adds.
    pub(crate) fn note(&self) -> String {
        match self {
            Self::Restored(key) => format!("restored from template snapshot {key}"),
            Self::Cold(why) => format!("cold boot: {why}"),
        }
    }
}

/// Why a VM boots cold rather than as a clone of its template's snapshot.
#[derive(Debug, thiserror::Error)]
pub enum Cold {
    /// The server runs without snapshots.
    #[error("snapshots are off (--vm-snapshots=false)")]
    SnapshotsOff,
    /// The image's guest cannot take a new identity after a restore.
    #[error("image {0:?} has no clone hook")]
    NoCloneHook(String),
    /// Devices passed through cannot be in a snapshot.
    #[error("it has GPUs passed through")]
    Gpus,
    /// A TPM's endorsement seed is its identity: every clone of a
    /// snapshot would have the template's.
    #[error("it has a TPM, whose identity would be its template's")]
    Tpm,
    /// Its EFI variable store is no longer OVMF's template (it booted
    /// before): a snapshot's firmware would overwrite it with its own.
    #[error("its EFI variable store holds what it wrote")]
    EfiVarsUsed,
    /// A snapshot's guest cannot take vCPUs or memory while it runs.
    #[error("it can be resized while it runs")]
    Resizable,
    /// A template's hardware is every VM's: virtio disks and NICs, one
    /// socket of single-thread cores, the platform's machine, no extra device.
    #[error("its hardware is not a template's (a topology, a bus, a NIC model, a machine type or a device of its own)")]
    Hardware,
    /// Only a root disk is in a template.
    #[error("it has data disks")]
    DataDisks,
    /// A clone takes its identity from its seed disk.
    #[error("it has no seed disk")]
    NoSeed,
    /// Its seed disk cannot be read.
    #[error("its seed {}: {source}", path.display())]
    Seed {
        /// The seed disk.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Why a clone could not be started from its template's snapshot.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    /// Making the template failed a moment ago; it is not tried again yet.
    #[error("its template could not be made lately: {0}")]
    FailedLately(String),
    /// The template's or the clone's snapshot step failed.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The template's disk could not be made.
    #[error(transparent)]
    Disk(#[from] crate::volumes::DiskError),
    /// A file could not be made.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        source: std::io::Error,
    },
    /// A blocking task died.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
    /// The clone did not start, and the VM's EFI variable store, which
    /// held the snapshot's for it, could not be put back: the VM must not
    /// boot cold on it (it would start with the template's variables).
    #[error("{clone}; and the VM's EFI variable store could not be put back as it was: {source}")]
    StoreNotPutBack {
        /// Why the clone did not start.
        clone: Box<CloneError>,
        /// Why the store was not put back.
        source: Box<CloneError>,
    },
}

/// The clone path: the template snapshots of this host, made on first
/// use, and the clones restored from them.
pub(crate) struct Clones {
    /// Whether VMs may start from snapshots at all.
    enabled: bool,
    /// The snapshots on disk.
    snapshots: Snapshots,
    /// `qemu --version`, which a snapshot's key includes.
    qemu_version: String,
    /// The accelerator, which a snapshot's key includes too.
    accel: Accel,
    /// `qemu-system-x86_64` and `qemu-img`.
    qemu: PathBuf,
    qemu_img: PathBuf,
    /// TCG's translation cache of each clone in MiB (`None`: QEMU's default).
    tcg_cache_mib: Option<u32>,
    /// Where each VM's directory is (a clone's state file names its snapshot).
    state_dir: PathBuf,
}

impl Clones {
    /// The clone path of a host whose snapshots are in `dir`.
    pub(crate) fn new(cfg: &crate::QemuConfig, dir: PathBuf, qemu_version: String, accel: Accel) -> Self {
        Self {
            enabled: cfg.snapshots,
            snapshots: Snapshots::new(dir),
            qemu_version,
            accel,
            qemu: cfg.qemu.clone(),
            qemu_img: cfg.qemu_img.clone(),
            tcg_cache_mib: (cfg.clone_tcg_cache_mib > 0).then_some(cfg.clone_tcg_cache_mib),
            state_dir: cfg.state_dir.clone(),
        }
    }

    /// The shape of the snapshot `t` may start from, or why it boots cold.
    pub(crate) fn shape(&self, image: &Image, t: &VmTarget, args: &QemuArgs) -> Result<Shape, Cold> {
        let machine = &t.spec.machine;
        if !self.enabled {
            return Err(Cold::SnapshotsOff);
        }
        if !image.manifest.clone_hook {
            return Err(Cold::NoCloneHook(image.manifest.name.clone()));
        }
        if !args.gpus.is_empty() {
            return Err(Cold::Gpus);
        }
        if args.platform.tpm.is_some() {
            return Err(Cold::Tpm);
        }
        if args.platform.efi.as_ref().is_some_and(|e| !e.fresh) {
            return Err(Cold::EfiVarsUsed);
        }
        if args.live.is_some() {
            return Err(Cold::Resizable);
        }
        let plain_nics = args.nics.iter().all(|n| n.model == vmaas_model::NicModel::Virtio);
        if !args.hardware.is_plain() || args.disks.iter().any(|d| d.bus != vmaas_model::DiskBus::Virtio) || !plain_nics {
            return Err(Cold::Hardware);
        }
        let [root] = machine.disks.as_slice() else { return Err(Cold::DataDisks) };
        let disk_bytes = root.size.to_units_ceil().unwrap_or(0);
        let seed = args.seed.as_deref().ok_or(Cold::NoSeed)?;
        let seed_bytes = std::fs::metadata(seed).map_err(|e| Cold::Seed { path: seed.to_owned(), source: e })?.len();
        Ok(Shape {
            cpus: args.cpus,
            memory_mib: args.memory_mib,
            disk_bytes,
            seed_bytes,
            user_nic: !args.nics.is_empty(),
            platform: args.platform.platform,
            firmware: args.platform.efi.as_ref().map(|e| e.code.clone()),
        })
    }

    /// The snapshot of `image` in `shape`, made now if there is none.
    async fn snapshot_for(&self, image: &Image, shape: &Shape, args: &QemuArgs) -> Result<Snapshot, CloneError> {
        let (img, sh, version, accel) = (image.clone(), shape.clone(), self.qemu_version.clone(), self.accel.as_str());
        let key = tokio::task::spawn_blocking(move || snapshot::key(&img, &sh, &version, accel)).await?;
        if let Some(s) = self.snapshots.find(&key) {
            return Ok(s);
        }
        let lock = self.snapshots.lock_for(&key);
        let _making = lock.lock().await;
        if let Some(s) = self.snapshots.find(&key) {
            return Ok(s);
        }
        if let Some(why) = self.snapshots.failed_lately(&key) {
            return Err(CloneError::FailedLately(why));
        }
        let staging = self.snapshots.staging(&key);
        let _ = tokio::fs::remove_dir_all(&staging).await;
        tokio::fs::create_dir_all(&staging)
            .await
            .map_err(|e| CloneError::Io { context: format!("creating {}", staging.display()), source: e })?;
        let started = std::time::Instant::now();
        let made = self.make_template(image, shape, args, &staging).await;
        if let Err(e) = made {
            let _ = tokio::fs::remove_dir_all(&staging).await;
            self.snapshots.record_failure(&key, &e.to_string());
            return Err(e);
        }
        let lineage = snapshot::lineage(image, shape);
        let snap = self.snapshots.publish(&key, &staging, &lineage).await?;
        info!(snapshot = %key, image = %image.manifest.name, cpus = shape.cpus, memory_mib = shape.memory_mib, secs = started.elapsed().as_secs_f64(), "template snapshot made");
        let mut keep = self.snapshots_in_use();
        keep.push(key);
        self.snapshots.prune(&keep, &lineage).await;
        Ok(snap)
    }

    /// Boots the template of `image` in `staging` and saves it there.
    async fn make_template(&self, image: &Image, shape: &Shape, args: &QemuArgs, staging: &Path) -> Result<(), CloneError> {
        let disk = staging.join("disk.qcow2");
        let base = image.disk();
        let format = crate::volumes::header(&base).await?.format;
        let size = shape.disk_bytes.to_string();
        let create: [&OsStr; 10] = [
            "create".as_ref(),
            "-q".as_ref(),
            "-f".as_ref(),
            "qcow2".as_ref(),
            "-F".as_ref(),
            format.as_ref(),
            "-b".as_ref(),
            base.as_os_str(),
            disk.as_os_str(),
            size.as_ref(),
        ];
        crate::volumes::qemu_img(&self.qemu_img, &create).await?;
        let seed = staging.join("seed.img");
        blank(&seed, shape.seed_bytes).await?;
        let mut clone = clone_args(args);
        if let Some(efi) = clone.platform.efi.as_mut() {
            let vars = staging.join(crate::platform::EFI_VARS);
            copy(&efi.vars, &vars).await?;
            efi.vars = vars;
        }
        let template = QemuArgs {
            name: "vmaas-template".into(),
            disks: args.disks.iter().map(|d| DiskArg { file: disk.clone(), ..d.clone() }).collect(),
            seed: Some(seed.clone()),
            nics: clone
                .nics
                .iter()
                .map(|n| UserNicArg {
                    mac: PLACEHOLDER_MAC.into(),
                    hostname: "vmaas-template".into(),
                    forwards: Vec::new(),
                    egress: false,
                    ..n.clone()
                })
                .collect(),
            ram: Some(RamFile { path: staging.join("ram"), shared: true }),
            serial: staging.join("serial.sock"),
            agent: staging.join(crate::agent::SOCKET),
            qmp: staging.join("qmp.sock"),
            vnc: staging.join(crate::display::SOCKET),
            pidfile: staging.join("qemu.pid"),
            ..clone
        };
        let made = snapshot::make(&self.qemu, &template, staging).await;
        let _ = tokio::fs::remove_file(&disk).await;
        let _ = tokio::fs::remove_file(&seed).await;
        Ok(made?)
    }

    /// Keys of the snapshots clones on this host were restored from (every
    /// VM directory's, quarantined VMs' too).
    fn snapshots_in_use(&self) -> Vec<String> {
        let dirs = std::fs::read_dir(&self.state_dir).into_iter().flatten().flatten();
        let states = dirs.filter_map(|d| std::fs::read(d.path().join(crate::state::STATE_FILE)).ok());
        states.filter_map(|f| serde_json::from_slice::<crate::state::VmFile>(&f).ok()).filter_map(|s| s.snapshot).collect()
    }

    /// Starts `t` (whose cold-boot arguments are `args`) as a clone of its
    /// template's snapshot; its process, the snapshot's key and the
    /// devices plugged in after the restore (as QEMU arguments).
    /// `held` are the VM's external ports, let go right before its QEMU starts.
    pub(crate) async fn start(
        &self,
        image: &Image,
        shape: &Shape,
        args: &QemuArgs,
        id: &str,
        held: Option<HeldPorts>,
    ) -> Result<Clone, CloneError> {
        let snap = self.snapshot_for(image, shape, args).await?;
        // The VM's variable store takes the snapshot's; should the clone not
        // start, it is put back as it was, so that the next try (another
        // external IP, a cold boot) finds it unused, not the template's.
        let own = match &args.platform.efi {
            Some(efi) => Some((efi.vars.clone(), swap_in(&snap.dir.join(crate::platform::EFI_VARS), &efi.vars).await?)),
            None => None,
        };
        put_back(self.restored(&snap, args, id, held).await, own).await
    }

    /// A QEMU for `args` restored from `snap`, with its further devices plugged in.
    async fn restored(&self, snap: &Snapshot, args: &QemuArgs, id: &str, held: Option<HeldPorts>) -> Result<Clone, CloneError> {
        let clone =
            QemuArgs { ram: Some(RamFile { path: snap.ram(), shared: false }), tcg_cache_mib: self.tcg_cache_mib, ..clone_args(args) };
        drop(held);
        let process = snapshot::spawn(&self.qemu, &clone, id).await?;
        let identity = Identity { nics: &args.nics, segment_nics: &args.segment_nics };
        if let Err(e) = snapshot::restore(&clone.qmp, snap, &identity).await {
            warn!(vm = %id, snapshot = %snap.key, error = %e, "restoring from the snapshot failed");
            process.kill_and_wait(std::time::Duration::from_secs(5)).await;
            return Err(e.into());
        }
        Ok(Clone { process, key: snap.key.clone(), plugged: snapshot::plugged_args(&identity) })
    }
}

impl CloneError {
    /// What QEMU said when it refused a host forward of the clone (its
    /// address taken by another process meanwhile): a cold boot would be
    /// refused alike, so the launch tries another address instead.
    pub(crate) fn forward_refused(&self) -> Option<String> {
        match self {
            Self::Snapshot(SnapshotError::Start(e)) => crate::process::forward_refused(e),
            _ => None,
        }
    }
}

/// A clone started.
pub(crate) struct Clone {
    /// Its QEMU.
    pub(crate) process: Process,
    /// The snapshot it was restored from.
    pub(crate) key: String,
    /// What was plugged into it after the restore, as QEMU arguments.
    pub(crate) plugged: Vec<String>,
}

/// A clone's arguments from the VM's cold-boot ones: the same machine,
/// kernel (booted as a template), root disk, seed and first user-network
/// NIC, at the template's slots; its other NICs and its volumes are
/// plugged in after the restore.
fn clone_args(args: &QemuArgs) -> QemuArgs {
    let kernel = args.kernel.clone().map(|mut k| {
        k.append = template_cmdline(&k.append);
        k
    });
    let nics = args.nics.iter().take(1).cloned().collect();
    QemuArgs { kernel, nics, fixed_slots: true, volumes: Vec::new(), segment_nics: Vec::new(), gpus: Vec::new(), ..args.clone() }
}

/// `started`, having put `own` (a file's path and what it held before the
/// clone took it) back when the clone did not start; the clone's error
/// stays the error, with the write's beside it should that fail too.
async fn put_back(started: Result<Clone, CloneError>, own: Option<(PathBuf, Vec<u8>)>) -> Result<Clone, CloneError> {
    match (started, own) {
        (Err(clone), Some((path, data))) => match write(&path, data).await {
            Ok(()) => Err(clone),
            Err(source) => Err(CloneError::StoreNotPutBack { clone: Box::new(clone), source: Box::new(source) }),
        },
        (started, _) => started,
    }
}

/// Copies `from` over `to` ([`crate::atomic::write_atomic`]: `to` is whole or as it was).
async fn copy(from: &Path, to: &Path) -> Result<(), CloneError> {
    let io = |e| CloneError::Io { context: format!("copying {} to {}", from.display(), to.display()), source: e };
    let data = tokio::fs::read(from).await.map_err(io)?;
    write(to, data).await
}

/// Copies `from` over `to`, as [`copy`]; what `to` held before.
async fn swap_in(from: &Path, to: &Path) -> Result<Vec<u8>, CloneError> {
    let before = tokio::fs::read(to).await.map_err(|e| CloneError::Io { context: format!("reading {}", to.display()), source: e })?;
    copy(from, to).await?;
    Ok(before)
}

/// Writes `data` to `path` whole ([`crate::atomic::write_atomic`]).
async fn write(path: &Path, data: Vec<u8>) -> Result<(), CloneError> {
    let io = |e| CloneError::Io { context: format!("writing {}", path.display()), source: e };
    let to = path.to_owned();
    tokio::task::spawn_blocking(move || crate::atomic::write_atomic(&to, &data)).await?.map_err(io)
}

/// Writes a seed disk of `bytes` zeros at `path`: no label, so the
/// template's guest finds no seed until a clone's replaces it.
async fn blank(path: &Path, bytes: u64) -> Result<(), CloneError> {
    let io = |what: &'static str| move |e| CloneError::Io { context: format!("{what} {}", path.display()), source: e };
    let file = tokio::fs::File::create(path).await.map_err(io("creating"))?;
    file.set_len(bytes).await.map_err(io("sizing"))
}

/// The template's kernel command line: the image's, without the VM's id
/// and machine-id (a clone's guest takes its own from its seed), with
/// `vmaas.template`.
fn template_cmdline(append: &str) -> String {
    let own = |w: &&str| w.starts_with("vmaas.id=") || w.starts_with("systemd.machine_id=");
    let mut words: Vec<&str> = append.split_whitespace().filter(|w| !own(w)).collect();
    words.push("vmaas.template");
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_boots_without_the_vms_id() {
        assert_eq!(template_cmdline("console=ttyS0 quiet vmaas.id=abc"), "console=ttyS0 quiet vmaas.template");
        assert_eq!(template_cmdline("console=ttyS0 vmaas.id=ab-c systemd.machine_id=abc quiet"), "console=ttyS0 quiet vmaas.template");
        assert_eq!(BootPath::Cold("snapshots are off".into()).note(), "cold boot: snapshots are off");
    }

    /// A clone that did not start puts the store back and keeps its own
    /// error; should putting it back fail, both errors are said, and the
    /// error is not the clone's alone (the launch must not boot cold on it).
    #[tokio::test]
    async fn a_clone_that_did_not_start_puts_the_store_back_or_says_it_could_not() {
        let dir = tempfile::tempdir().unwrap();
        let vars = dir.path().join("efi-vars.fd");
        std::fs::write(&vars, b"the snapshot's").unwrap();
        let failed = || Err(CloneError::FailedLately("no template".into()));
        let e = put_back(failed(), Some((vars.clone(), b"the VM's own".to_vec()))).await.err().unwrap();
        assert!(matches!(e, CloneError::FailedLately(_)), "{e}");
        assert_eq!(std::fs::read(&vars).unwrap(), b"the VM's own");

        let nowhere = dir.path().join("gone").join("efi-vars.fd");
        let e = put_back(failed(), Some((nowhere, b"the VM's own".to_vec()))).await.err().unwrap();
        assert!(matches!(e, CloneError::StoreNotPutBack { .. }), "{e}");
        let said = e.to_string();
        assert!(said.contains("no template") && said.contains("could not be put back"), "{said}");
        assert!(put_back(failed(), None).await.is_err_and(|e| matches!(e, CloneError::FailedLately(_))));
    }
}
