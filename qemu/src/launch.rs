//! Starting a VM's QEMU (its disks, its external IP, its command line) and
//! removing everything a VM has.

use std::ffi::OsStr;
use std::process::Stdio;

use tokio::process::Command;
use tracing::info;
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::boot_shape::BootShape;
use vmaas_model::{DiskSource, Reason};

use crate::Vms;
use crate::argv::{DiskArg, KernelBoot, QemuArgs, UserNicArg};
use crate::cidata;
use crate::clone::BootPath;
use crate::lifecycle::{Stop, Vm};
use crate::probe::effective_probe;
use crate::process::{Process, StartError, free_local_port, read_pid};

/// The MAC of the `i`th NIC of VM `vm` on QEMU's user network: QEMU's
/// prefix and three bytes of the VM's id and the NIC's index, so that no
/// two VMs share one (clones of one snapshot included), written out so the
/// cloud-init network configuration can name it.
fn user_mac(vm: &str, i: usize) -> String {
    let [_, a, b, c] = crate::ports::nic_hash(vm, i).to_be_bytes();
    format!("52:54:00:{a:02x}:{b:02x}:{c:02x}")
}

fn failed(reason: &str, message: impl Into<String>) -> Stop {
    Stop::Failed(Reason::new(reason, message))
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

impl Vms {
    async fn qemu_img(&self, args: &[&OsStr]) -> Result<(), crate::volumes::DiskError> {
        crate::volumes::qemu_img(&self.cfg.qemu_img, args).await
    }

    /// Grows `file` to `disk`'s size if it is smaller (a disk never shrinks:
    /// the API refuses that); the guest's file system grows at its boot.
    async fn grow(&self, file: &std::path::Path, disk: &vmaas_model::Disk) -> Result<(), Stop> {
        let wanted = disk.size.to_units_ceil().unwrap_or(0);
        let grown = crate::volumes::grow_file(&self.cfg.qemu_img, file, wanted)
            .await
            .map_err(|m| failed("DiskError", format!("growing disk {} to {}: {m}", disk.name, disk.size)))?;
        if let Some(from) = grown {
            info!(disk = %disk.name, from, to = %disk.size, "disk grown");
        }
        Ok(())
    }

    /// One qcow2 file per disk of the machine, created on first boot and
    /// grown when the spec asks for more.
    async fn disks(&self, vm: &Vm, t: &VmTarget, base: &std::path::Path) -> Result<Vec<DiskArg>, Stop> {
        let mut out = Vec::new();
        for d in &t.spec.machine.disks {
            let is_root = d.source == DiskSource::Image;
            let file = if is_root { vm.path("disk.qcow2") } else { vm.path(&format!("disk-{}.qcow2", d.name)) };
            if tokio::fs::try_exists(&file).await.unwrap_or(false) {
                self.grow(&file, d).await?;
            } else {
                let size = d.size.to_units_ceil().unwrap_or(0).to_string();
                let mut args: Vec<&OsStr> = vec!["create".as_ref(), "-q".as_ref(), "-f".as_ref(), "qcow2".as_ref()];
                let format = if is_root {
                    crate::volumes::header(base).await.map_err(|m| failed("ImageNotFound", m.to_string()))?.format
                } else {
                    ""
                };
                if is_root {
                    args.extend(["-F".as_ref(), format.as_ref(), "-b".as_ref(), base.as_os_str()]);
                }
                args.extend([file.as_os_str(), size.as_ref()]);
                self.qemu_img(&args).await.map_err(|m| failed("DiskError", format!("creating disk {} ({}): {m}", d.name, d.size)))?;
            }
            out.push(DiskArg { id: format!("disk-{}", d.name), file, boot_index: is_root.then_some(1) });
        }
        Ok(out)
    }

    /// Starts QEMU for `t`, daemonized, and takes hold of its process.
    pub(crate) async fn launch(&self, vm: &mut Vm, t: &VmTarget) -> Result<Process, Stop> {
        let machine = &t.spec.machine;
        let catalog = self.cfg.images.clone();
        let name = machine.boot.image.clone();
        let (imports, imported) = (self.image_dir.clone(), t.spec.imported_image.clone());
        let image = tokio::task::spawn_blocking(move || match imported {
            Some(id) => crate::import::imported(&imports, &id),
            None => catalog.get(&name),
        })
        .await
        .map_err(|e| Stop::Backend(BackendError::transient("reading the image catalog", e)))?
        .map_err(|m| failed("ImageNotFound", m.to_string()))?;
        let base =
            tokio::fs::canonicalize(image.disk()).await.map_err(|e| failed("ImageNotFound", format!("{}: {e}", image.disk().display())))?;
        let disks = self.disks(vm, t, &base).await?;
        let external = match vm.file.external_ip {
            Some(ip) => ip,
            None => {
                // An address whose ports another process holds (another server, say) is skipped.
                let ports: Vec<_> = machine.exposed_ports.iter().map(|p| (p.protocol, p.port)).collect();
                let ip = self.pool_lock().allocate_usable(&t.id, |ip| crate::pool::free_on_host(ip, &ports)).ok_or_else(|| {
                    failed("NoExternalIP", "the external IP pool is exhausted (or its addresses are held by other processes)")
                })?;
                vm.file.external_ip = Some(ip);
                vm.file.save(&vm.dir).await?;
                ip
            }
        };
        let probe = effective_probe(machine);
        let probe_port = match &probe {
            Some(_) => Some(free_local_port().map_err(|e| failed("PortForwardFailed", e.to_string()))?),
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
        // One user network per VM: the first NIC carries the forwards.
        let nics: Vec<UserNicArg> = machine
            .nics
            .iter()
            .enumerate()
            .map(|(i, n)| UserNicArg {
                id: format!("nic-{}", n.name),
                mac: user_mac(&t.id, i),
                hostname: t.name.clone(),
                forwards: if i == 0 { forwards.clone() } else { Vec::new() },
                egress: self.cfg.egress.iter().any(|n| n == crate::DEFAULT_NETWORK),
            })
            .collect();
        for f in ["qmp.sock", "serial.sock", "qemu.pid"] {
            let _ = tokio::fs::remove_file(vm.path(f)).await;
        }
        let macs: Vec<&str> = nics.iter().map(|n| n.mac.as_str()).chain(vm.segment_nics.iter().map(|n| n.mac.as_str())).collect();
        let seed = vmaas_model::nocloud::seed(&t.id, &t.name, &machine.cloud_init, &macs);
        let seed_file = vm.path(cidata::FILE);
        let path = seed_file.clone();
        tokio::task::spawn_blocking(move || cidata::write(&path, &seed))
            .await
            .map_err(|e| Stop::Backend(BackendError::transient("writing the cloud-init seed", e)))?
            .map_err(|e| failed("DiskError", format!("writing the cloud-init seed {}: {e}", seed_file.display())))?;
        let (volumes, plugged) = self.boot_volumes(t).await;
        let (cpus, memory_mib) = QemuArgs::shape(machine);
        let kernel = image.kernel().map(|kernel| KernelBoot {
            kernel,
            initrd: image.initrd(),
            append: format!("{} vmaas.id={}", image.manifest.cmdline.clone().unwrap_or_else(|| "console=ttyS0".into()), t.id),
        });
        let platform = machine.profile.over(&image.manifest.profile()).platform();
        let tpm_state = vm.file.tpm_state.as_deref().unwrap_or(crate::platform::TPM_DIR);
        let platform = self.cfg.platform.prepare(platform, &vm.dir, tpm_state).await.map_err(|e| failed(e.reason(), e.to_string()))?;
        let args = QemuArgs {
            name: format!("vmaas-{},process=vmaas-{}", t.name, &t.id[..8.min(t.id.len())]),
            accel: self.accel.accel,
            cpus,
            memory_mib,
            ram: None,
            tcg_cache_mib: None,
            kernel,
            disks,
            seed: Some(seed_file),
            volumes,
            nics,
            segment_nics: vm.segment_nics.clone(),
            fixed_slots: false,
            gpus: self.gpus.take(&t.id, &machine.gpus).map_err(Stop::Failed)?,
            serial: vm.path("serial.sock"),
            qmp: vm.path("qmp.sock"),
            pidfile: vm.path("qemu.pid"),
            platform,
            live: crate::live::LiveArgs::of(machine),
        };
        // What a server killed while QEMU starts must find in vm.json to
        // adopt that QEMU: its probe port and forwards, written before.
        vm.file.probe_port = probe_port;
        vm.file.ready_pid = None;
        vm.file.forwards = extra;
        vm.file.booted = Some(BootShape::of(machine));
        vm.file.gpus = args.gpus.clone();
        vm.file.live = args.live.clone();
        vm.file.snapshot = None;
        vm.file.plugged.clear();
        vm.file.save(&vm.dir).await?;
        let started = match self.clone_shape(&image, t, &args) {
            Ok(shape) => match self.start_clone(&image, &shape, &args, &t.id).await {
                Ok(c) => {
                    vm.file.plugged = c.plugged;
                    Ok((c.process, Vec::new(), BootPath::Restored(c.key)))
                }
                Err(e) => {
                    self.boot_cold(&args, t).await.map(|p| (p, plugged, BootPath::Cold(format!("the snapshot could not be used: {e}"))))
                }
            },
            Err(why) => self.boot_cold(&args, t).await.map(|p| (p, plugged, BootPath::Cold(why.to_string()))),
        };
        let (process, plugged, boot) = match started {
            // Another process took the VM's own address between its choice and QEMU's bind: another one, not FAILED.
            Err(Stop::Failed(r)) if r.reason == "PortForwardFailed" && r.message.contains(&format!("{external}:")) => {
                self.pool_lock().release(&t.id);
                vm.file.external_ip = None;
                vm.file.save(&vm.dir).await?;
                let why = format!("another process took {external} meanwhile: the VM gets another address");
                return Err(Stop::Backend(BackendError::transient("starting QEMU", why)));
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

    /// Boots `args` from scratch, daemonized; its process.
    async fn boot_cold(&self, args: &QemuArgs, t: &VmTarget) -> Result<Process, Stop> {
        crate::process::start_daemonized(&self.cfg.qemu, &args.to_args(), &args.pidfile, &t.id).await.map_err(|e| {
            let reason = match &e {
                StartError::Refused(said) if said.contains("host forwarding") || said.contains("hostfwd") => "PortForwardFailed",
                _ => "QemuFailed",
            };
            if matches!(e, StartError::Refused(_)) {
                self.gpus.release(&t.id);
            }
            failed(reason, e.to_string())
        })
    }

    /// Removes everything VM `id` has: its process, directory and external IP.
    pub(crate) async fn delete_vm(&self, id: &str) -> Result<(), BackendError> {
        let handle = self.handle(id);
        let dir = self.cfg.state_dir.join(id);
        let process = match &handle {
            Some(h) => h.lock().await.process.clone(),
            None => match read_pid(&dir.join("qemu.pid")).await {
                Some(pid) => Process::adopt(pid, id).await.map(std::sync::Arc::new),
                None => None,
            },
        };
        if let Some(p) = process.filter(|p| !p.has_exited()) {
            // Its volumes outlive it: the guest powers off and QEMU flushes them first.
            crate::lifecycle::shut_down(id, &dir.join("qmp.sock"), &p, self.cfg.stop_grace).await;
            if !p.has_exited() {
                return Err(BackendError::transient("stopping the guest", format!("QEMU (pid {}) survives SIGKILL", p.pid())));
            }
        }
        if let Some(h) = &handle {
            h.lock().await.stop_runtime();
        }
        self.detach_ports(id).await;
        // A swtpm whose QEMU never connected (a crash between the two starts) ends with its VM.
        crate::platform::stop_swtpm(&dir).await;
        crate::platform::stop_target_swtpm(&dir).await;
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::transient(format!("removing {}", dir.display()), e)),
        }
        self.pool_lock().release(id);
        self.gpus.release(id);
        self.forget(id);
        info!(vm = %id, "guest deleted");
        Ok(())
    }
}
