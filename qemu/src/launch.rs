//! Starting a VM's QEMU: its image, disks, external IP, cloud-init seed,
//! platform and command line, then a clone of its template's snapshot or
//! a cold boot. [`Launcher`] owns what a launch takes from the host (the
//! external IP pool and the GPUs) and gives it back when the VM goes.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};

use tokio::process::Command;
use tracing::info;
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::boot_shape::BootShape;
use vmaas_model::nocloud::SeedNic;
use vmaas_model::{DiskSource, Reason};

use crate::accel::Accel;
use crate::argv::{DiskArg, Forward, KernelBoot, QemuArgs, UserNicArg};
use crate::cidata;
use crate::clone::{BootPath, Clones};
use crate::gpus::Gpus;
use crate::hotplug::Plugs;
use crate::images::{Catalog, Image};
use crate::platform::PlatformPaths;
use crate::pool::{HeldPorts, IpPool};
use crate::probe::effective_probe;
use crate::process::{Process, StartError, free_local_port};
use crate::state::PluggedVolume;
use crate::vm::Vm;

/// The MAC of the `i`th NIC of VM `vm` on QEMU's user network: QEMU's
/// prefix and three bytes of the VM's id and the NIC's index, so that no
/// two VMs share one (clones of one snapshot included), written out so the
/// cloud-init network configuration can name it.
fn user_mac(vm: &str, i: usize) -> String {
    let [_, a, b, c] = crate::ports::nic_hash(vm, i).to_be_bytes();
    format!("52:54:00:{a:02x}:{b:02x}:{c:02x}")
}

/// Why a VM's QEMU could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Its image is not there.
    #[error("{0}")]
    ImageNotFound(String),
    /// A disk or its seed could not be made or grown.
    #[error("{0}")]
    Disk(String),
    /// The external IP pool has no usable address.
    #[error("the external IP pool is exhausted (or its addresses are held by other processes)")]
    NoExternalIp,
    /// A port could not be forwarded to it.
    #[error("{0}")]
    PortForward(String),
    /// Another process took its external address between its choice and QEMU's bind.
    #[error("another process took {0} meanwhile: the VM gets another address")]
    AddressTaken(Ipv4Addr),
    /// Its firmware or TPM could not be prepared.
    #[error(transparent)]
    Platform(#[from] crate::platform::PlatformError),
    /// Its GPUs are not free.
    #[error("{}", .0.message)]
    Gpus(Reason),
    /// QEMU did not start.
    #[error(transparent)]
    Qemu(StartError),
    /// The host failed for now (a task, a state file): tried again.
    #[error(transparent)]
    Transient(#[from] BackendError),
}

impl LaunchError {
    /// The reason code of a VM that cannot start for this.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::ImageNotFound(_) => "ImageNotFound",
            Self::Disk(_) => "DiskError",
            Self::NoExternalIp => "NoExternalIP",
            Self::PortForward(_) | Self::AddressTaken(_) => "PortForwardFailed",
            Self::Platform(p) => p.reason(),
            Self::Gpus(_) => "NoGPUAvailable",
            Self::Qemu(_) | Self::Transient(_) => "QemuFailed",
        }
    }
}

/// Starts a detached watcher that stops QEMU `pid` once the VM's directory
/// (its state file) is gone: a guest whose host state was removed behind the
/// server's back (a deleted data directory) does not run on forever. It
/// checks every 2 s, and kills only a process whose command line still
/// names the VM.
pub(crate) async fn sentinel(dir: &std::path::Path, pid: i32, id: &str) {
    const SCRIPT: &str = r#"(
        trap '' HUP
        while kill -0 "$2" 2>/dev/null && [ -e "$1/vm.json" ]; do sleep 2; done
        if tr '\0' ' ' < "/proc/$2/cmdline" 2>/dev/null | grep -qF -- "$3"; then kill -9 "$2"; fi
    ) </dev/null >/dev/null 2>&1 &"#;
    let spawned = Command::new("sh")
        .args(["-c", SCRIPT, "vmaas-sentinel"])
        .arg(dir)
        .arg(pid.to_string())
        .arg(id)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if let Err(e) = spawned {
        tracing::warn!(vm = %id, error = %e, "cannot start the guest's sentinel");
    }
}

/// A VM's user network: its NICs, the extra forwards it asks for and its probe's port.
struct UserNet {
    nics: Vec<UserNicArg>,
    extra: Vec<Forward>,
    probe_port: Option<u16>,
}

/// A cold boot's command line, the volumes it starts with, the extra
/// forwards and the probe's port.
struct Plan {
    args: QemuArgs,
    plugged: Vec<PluggedVolume>,
    extra: Vec<Forward>,
    probe_port: Option<u16>,
}

/// Starts VMs' QEMUs, and holds what they take from the host.
pub(crate) struct Launcher {
    /// `qemu-system-x86_64` and `qemu-img`.
    qemu: PathBuf,
    qemu_img: PathBuf,
    accel: Accel,
    /// Base images, and where imported ones are.
    images: Catalog,
    image_dir: PathBuf,
    /// Whether guests on the default network may open connections beyond it.
    egress: bool,
    /// OVMF and swtpm.
    platform: PlatformPaths,
    /// External IPs, each held by one VM.
    pool: Mutex<IpPool>,
    /// Host GPUs, each held by one VM.
    gpus: Gpus,
    /// The clone path.
    clones: Clones,
    /// Volumes a VM starts with.
    plugs: Plugs,
}

impl Launcher {
    /// A launcher of `cfg`'s QEMU under `accel`, its images imported to
    /// `image_dir`, with the host's `gpus`, the clone path and the volumes.
    pub(crate) fn new(cfg: &crate::QemuConfig, accel: Accel, image_dir: PathBuf, gpus: Gpus, clones: Clones, plugs: Plugs) -> Self {
        Self {
            qemu: cfg.qemu.clone(),
            qemu_img: cfg.qemu_img.clone(),
            accel,
            images: cfg.images.clone(),
            image_dir,
            egress: cfg.egress.iter().any(|n| n == crate::DEFAULT_NETWORK),
            platform: cfg.platform.clone(),
            pool: Mutex::new(IpPool::new(cfg.pool)),
            gpus,
            clones,
            plugs,
        }
    }

    /// The external IP pool.
    pub(crate) fn pool(&self) -> MutexGuard<'_, IpPool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The host's GPUs and who holds them.
    pub(crate) fn gpus(&self) -> &Gpus {
        &self.gpus
    }

    /// Gives back what VM `id` held: its external IP and GPUs.
    pub(crate) fn release(&self, id: &str) {
        self.pool().release(id);
        self.gpus.release(id);
    }

    /// Starts QEMU for `t`, daemonized, and takes hold of its process.
    pub(crate) async fn launch(&self, vm: &mut Vm, t: &VmTarget) -> Result<Process, LaunchError> {
        let image = self.image(t).await?;
        let base = tokio::fs::canonicalize(image.disk())
            .await
            .map_err(|e| LaunchError::ImageNotFound(format!("{}: {e}", image.disk().display())))?;
        let disks = self.disks(vm, t, &base).await?;
        let (external, held) = self.external_ip(vm, t).await?;
        let Plan { args, plugged, extra, probe_port } = self.args(vm, t, &image, disks, external).await?;
        // What a server killed while QEMU starts must find in vm.json to
        // adopt that QEMU: its probe port and forwards, written before.
        vm.file.probe_port = probe_port;
        vm.file.ready_pid = None;
        vm.file.forwards = extra;
        vm.file.booted = Some(BootShape::of(&t.spec.machine));
        vm.file.gpus = args.gpus.clone();
        vm.file.live = args.live.clone();
        vm.file.snapshot = None;
        vm.file.plugged.clear();
        vm.file.save(&vm.dir).await?;
        let (process, plugged, boot) = match self.start(vm, t, &image, &args, plugged, held).await {
            // Another process took the VM's own address between its choice and QEMU's bind: another one, not FAILED.
            Err(LaunchError::PortForward(m)) if m.contains(&format!("{external}:")) => {
                self.pool().release(&t.id);
                vm.file.external_ip = None;
                vm.file.save(&vm.dir).await?;
                return Err(LaunchError::AddressTaken(external));
            }
            r => r?,
        };
        info!(vm = %t.id, boot = %boot.note(), "guest started");
        vm.file.volumes = plugged;
        vm.file.snapshot = match &boot {
            BootPath::Restored(key) => Some(key.clone()),
            BootPath::Cold(_) => {
                vm.file.plugged.clear();
                None
            }
        };
        vm.boot = Some(boot);
        vm.file.save(&vm.dir).await?;
        sentinel(&vm.dir, process.pid(), &t.id).await;
        Ok(process)
    }

    /// The image `t` boots: imported, or from the catalog.
    async fn image(&self, t: &VmTarget) -> Result<Image, LaunchError> {
        let catalog = self.images.clone();
        let name = t.spec.machine.boot.image.clone();
        let (imports, imported) = (self.image_dir.clone(), t.spec.imported_image.clone());
        tokio::task::spawn_blocking(move || match imported {
            Some(id) => crate::import::imported(&imports, &id),
            None => catalog.get(&name),
        })
        .await
        .map_err(|e| BackendError::transient("reading the image catalog", e))?
        .map_err(|m| LaunchError::ImageNotFound(m.to_string()))
    }

    /// The VM's external IP: the one it has, or a free one from the pool;
    /// and its ports, held until QEMU binds them (none when another process
    /// holds the VM's own address already: QEMU is refused, and the VM
    /// gets another).
    async fn external_ip(&self, vm: &mut Vm, t: &VmTarget) -> Result<(Ipv4Addr, Option<HeldPorts>), LaunchError> {
        let ports: Vec<_> = t.spec.machine.exposed_ports.iter().map(|p| (p.protocol, p.port)).collect();
        if let Some(ip) = vm.file.external_ip {
            return Ok((ip, crate::pool::hold_on_host(ip, &ports)));
        }
        // An address whose ports another process holds (another server, say) is skipped.
        let held = std::cell::RefCell::new(None);
        let usable = |ip| crate::pool::hold_on_host(ip, &ports).map(|h| held.replace(Some(h))).is_some();
        let ip = self.pool().allocate_usable(&t.id, usable).ok_or(LaunchError::NoExternalIp)?;
        let held = held.into_inner().or_else(|| crate::pool::hold_on_host(ip, &ports));
        vm.file.external_ip = Some(ip);
        vm.file.save(&vm.dir).await?;
        Ok((ip, held))
    }

    /// Grows `file` to `disk`'s size if it is smaller (a disk never shrinks:
    /// the API refuses that); the guest's file system grows at its boot.
    async fn grow(&self, file: &Path, disk: &vmaas_model::Disk) -> Result<(), LaunchError> {
        let wanted = disk.size.to_units_ceil().unwrap_or(0);
        let grown = crate::volumes::grow_file(&self.qemu_img, file, wanted)
            .await
            .map_err(|m| LaunchError::Disk(format!("growing disk {} to {}: {m}", disk.name, disk.size)))?;
        if let Some(from) = grown {
            info!(disk = %disk.name, from, to = %disk.size, "disk grown");
        }
        Ok(())
    }

    /// One qcow2 file per disk of the machine, created on first boot and
    /// grown when the spec asks for more.
    async fn disks(&self, vm: &Vm, t: &VmTarget, base: &Path) -> Result<Vec<DiskArg>, LaunchError> {
        let mut out = Vec::new();
        for d in &t.spec.machine.disks {
            let is_root = d.source == DiskSource::Image;
            let file = vm.disk_file(d);
            if tokio::fs::try_exists(&file).await.unwrap_or(false) {
                self.grow(&file, d).await?;
            } else {
                let size = d.size.to_units_ceil().unwrap_or(0).to_string();
                let mut args: Vec<&OsStr> = vec!["create".as_ref(), "-q".as_ref(), "-f".as_ref(), "qcow2".as_ref()];
                let format = if is_root {
                    crate::volumes::header(base).await.map_err(|m| LaunchError::ImageNotFound(m.to_string()))?.format
                } else {
                    ""
                };
                if is_root {
                    args.extend(["-F".as_ref(), format.as_ref(), "-b".as_ref(), base.as_os_str()]);
                }
                args.extend([file.as_os_str(), size.as_ref()]);
                crate::volumes::qemu_img(&self.qemu_img, &args)
                    .await
                    .map_err(|m| LaunchError::Disk(format!("creating disk {} ({}): {m}", d.name, d.size)))?;
            }
            out.push(DiskArg { id: crate::argv::disk_node(&d.name), file, boot_index: is_root.then_some(1), bus: d.bus });
        }
        Ok(out)
    }

    /// The NICs on QEMU's user network (one per VM: the first carries the
    /// forwards), the extra forwards `t` asks for, and the probe's port.
    fn user_nics(&self, t: &VmTarget, external: Ipv4Addr) -> Result<UserNet, LaunchError> {
        let machine = &t.spec.machine;
        let probe = effective_probe(machine);
        let probe_port = match &probe {
            Some(_) => Some(free_local_port().map_err(|e| LaunchError::PortForward(e.to_string()))?),
            None => None,
        };
        let mut extra = crate::forwards::wanted(t, external);
        let mut forwards = QemuArgs::forwards(&machine.exposed_ports, external, probe_port.zip(probe.as_ref().map(|p| p.check.port())));
        if crate::gateway::through_subnet(t) {
            // Its ports enter through its subnet NIC (the gateway's forwards).
            extra.retain(crate::gateway::stays_in_qemu);
            forwards.retain(crate::gateway::stays_in_qemu);
        }
        forwards.extend(extra.iter().cloned());
        let nics = machine
            .nics
            .iter()
            .enumerate()
            .map(|(i, n)| UserNicArg {
                id: format!("nic-{}", n.name),
                mac: user_mac(&t.id, i),
                hostname: t.name.clone(),
                forwards: if i == 0 { forwards.clone() } else { Vec::new() },
                egress: self.egress,
                model: n.model,
            })
            .collect();
        Ok(UserNet { nics, extra, probe_port })
    }

    /// Writes the VM's NoCloud seed for NICs `nics`; its path.
    async fn seed(&self, vm: &Vm, t: &VmTarget, nics: &[SeedNic<'_>]) -> Result<PathBuf, LaunchError> {
        let seed = vmaas_model::nocloud::seed(&t.id, &t.name, &t.spec.machine.cloud_init, nics);
        let seed_file = vm.path(cidata::FILE);
        let path = seed_file.clone();
        tokio::task::spawn_blocking(move || cidata::write(&path, &seed))
            .await
            .map_err(|e| BackendError::transient("writing the cloud-init seed", e))?
            .map_err(|e| LaunchError::Disk(format!("writing the cloud-init seed {}: {e}", seed_file.display())))?;
        Ok(seed_file)
    }

    /// `t`'s cold-boot command line, the volumes it boots with, its extra
    /// forwards and its probe's port.
    async fn args(&self, vm: &Vm, t: &VmTarget, image: &Image, disks: Vec<DiskArg>, external: Ipv4Addr) -> Result<Plan, LaunchError> {
        let machine = &t.spec.machine;
        let UserNet { nics, extra, probe_port } = self.user_nics(t, external)?;
        for f in ["qmp.sock", crate::io_error::SOCKET, "serial.sock", crate::display::SOCKET, "qemu.pid"] {
            let _ = tokio::fs::remove_file(vm.path(f)).await;
        }
        let fixed: Vec<_> = (0..nics.len()).map(|i| crate::argv::user_nic_address(i == 0)).collect();
        let user = nics.iter().zip(&fixed).map(|(n, f)| SeedNic { mac: &n.mac, fixed: Some(f) });
        let segments = vm.segment_nics.iter().map(|n| SeedNic { mac: &n.mac, fixed: None });
        let seed = self.seed(vm, t, &user.chain(segments).collect::<Vec<_>>()).await?;
        let (volumes, plugged) = self.plugs.at_boot(t).await;
        let (cpus, memory_mib) = QemuArgs::shape(machine);
        let kernel = image.kernel().map(|kernel| KernelBoot {
            kernel,
            initrd: image.initrd(),
            append: kernel_cmdline(image.manifest.cmdline.as_deref(), &t.id),
        });
        let platform = machine.profile.over(&image.manifest.profile()).platform();
        let tpm_state = vm.file.tpm_state.as_deref().unwrap_or(crate::platform::TPM_DIR);
        let platform = self.platform.prepare(platform, &vm.dir, tpm_state).await?;
        let args = QemuArgs {
            name: format!("vmaas-{},process=vmaas-{}", t.name, &t.id[..8.min(t.id.len())]),
            accel: self.accel,
            cpus,
            memory_mib,
            ram: None,
            tcg_cache_mib: None,
            kernel,
            disks,
            seed: Some(seed),
            volumes,
            nics,
            segment_nics: vm.segment_nics.clone(),
            fixed_slots: false,
            gpus: self.gpus.take(&t.id, &machine.gpus).map_err(LaunchError::Gpus)?,
            serial: vm.path("serial.sock"),
            agent: vm.path(crate::agent::SOCKET),
            qmp: vm.path("qmp.sock"),
            vnc: vm.path(crate::display::SOCKET),
            pidfile: vm.path("qemu.pid"),
            platform,
            live: crate::live::LiveArgs::of(machine),
            hardware: crate::hardware::HardwareArgs::of(machine),
        };
        Ok(Plan { args, plugged, extra, probe_port })
    }

    /// Starts `args` as a clone of its template's snapshot where it may,
    /// else cold; the process, the volumes it has and how it started.
    async fn start(
        &self,
        vm: &mut Vm,
        t: &VmTarget,
        image: &Image,
        args: &QemuArgs,
        plugged: Vec<PluggedVolume>,
        held: Option<HeldPorts>,
    ) -> Result<(Process, Vec<PluggedVolume>, BootPath), LaunchError> {
        let shape = match self.clones.shape(image, t, args) {
            Ok(shape) => shape,
            Err(why) => return self.boot_cold(args, t, held).await.map(|p| (p, plugged, BootPath::Cold(why.to_string()))),
        };
        match self.clones.start(image, &shape, args, &t.id, held).await {
            Ok(c) => {
                vm.file.plugged = c.plugged;
                Ok((c.process, Vec::new(), BootPath::Restored(c.key)))
            }
            Err(e) => {
                if let Some(said) = e.forward_refused() {
                    return Err(LaunchError::PortForward(said));
                }
                if matches!(e, crate::clone::CloneError::StoreNotPutBack { .. }) {
                    return Err(LaunchError::Transient(BackendError::transient("starting from the template's snapshot", e)));
                }
                self.boot_cold(args, t, None).await.map(|p| (p, plugged, BootPath::Cold(format!("the snapshot could not be used: {e}"))))
            }
        }
    }

    /// Boots `args` from scratch, daemonized (letting go of `held` ports
    /// for QEMU to bind); its process.
    async fn boot_cold(&self, args: &QemuArgs, t: &VmTarget, held: Option<HeldPorts>) -> Result<Process, LaunchError> {
        drop(held);
        crate::process::start_daemonized(&self.qemu, &args.to_args(), &args.pidfile, &t.id).await.map_err(|e| {
            if matches!(e, StartError::Refused(_)) {
                self.gpus.release(&t.id);
            }
            match crate::process::forward_refused(&e) {
                Some(said) => LaunchError::PortForward(said),
                None => LaunchError::Qemu(e),
            }
        })
    }
}

/// The kernel command line of VM `id` booting an image whose own is
/// `image`: the VM's id, and the VM's id as systemd's machine-id (so every
/// VM, a clone too, has its own, whatever machine-id its disk holds).
fn kernel_cmdline(image: Option<&str>, id: &str) -> String {
    let base = image.unwrap_or("console=ttyS0");
    let machine_id: String = id.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    if machine_id.len() == 32 && machine_id.chars().all(|c| c.is_ascii_hexdigit()) && machine_id.chars().any(|c| c != '0') {
        format!("{base} vmaas.id={id} systemd.machine_id={machine_id}")
    } else {
        format!("{base} vmaas.id={id}")
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_cmdline;

    #[test]
    fn each_vm_gets_its_id_as_machine_id() {
        let line = kernel_cmdline(Some("console=ttyS0 quiet"), "0b3c5e0e-1234-4abc-9DEF-000000000001");
        assert_eq!(
            line,
            "console=ttyS0 quiet vmaas.id=0b3c5e0e-1234-4abc-9DEF-000000000001 systemd.machine_id=0b3c5e0e12344abc9def000000000001"
        );
        assert_eq!(kernel_cmdline(None, "not-a-uuid"), "console=ttyS0 vmaas.id=not-a-uuid");
    }
}
