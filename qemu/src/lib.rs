//! # vmaas-qemu
//!
//! The `qemu` backend: real VMs on this host, one QEMU process per VM,
//! supervised by the server and controlled over QMP.
//!
//! - [`accel`]: KVM where it really works, else TCG.
//! - [`images`]: base images (a disk, and a kernel to boot directly).
//! - [`pool`]: external IPs from a loopback pool.
//! - [`console`]: the serial console, owned for the guest's whole life.
//! - [`qmp`]: the QMP client.
//!
//! Each VM has a directory `STATE/<id>/` with its disk (a copy-on-write
//! overlay of the image's base disk), its QMP and serial sockets, its pid
//! file, its console log and `vm.json` (its external IP). QEMU runs
//! daemonized, so VMs outlive a server restart; the server re-adopts them
//! from their pid files and sockets.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod accel;
pub mod console;
pub mod images;
pub mod pool;
pub mod qmp;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{info, warn};
use vmaas_backend::{Backend, BackendError, Cleanup, Console, VmTarget};
use vmaas_model::{Observation, Phase, PowerState, Probe, ProbeCheck, Protocol, Reason, ResolvedSpec};

use crate::accel::{Accel, AccelChoice, AccelDecision};
use crate::console::SerialConsole;
use crate::images::Catalog;
use crate::pool::{Cidr, IpPool};
use crate::qmp::Qmp;

/// The address QEMU's user-mode network gives the guest.
pub const GUEST_IP: &str = "10.0.2.15";

/// How the backend runs.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    /// Where each VM's directory lives.
    pub state_dir: PathBuf,
    /// Base images.
    pub images: Catalog,
    /// External IP pool.
    pub pool: Cidr,
    /// Accelerator choice.
    pub accel: AccelChoice,
    /// `qemu-system-x86_64`.
    pub qemu: PathBuf,
    /// `qemu-img`.
    pub qemu_img: PathBuf,
    /// How long a guest gets to power off before it is stopped hard.
    pub stop_grace: Duration,
}

/// What the host can give.
#[derive(Debug, Clone, Serialize)]
struct Host {
    cpus: u32,
    memory_bytes: u64,
    /// PCI addresses of GPUs bound to vfio-pci.
    gpus: Vec<String>,
}

impl Host {
    fn probe() -> Self {
        let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
            .map(|kib| kib * 1024)
            .unwrap_or(0);
        let mut gpus = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/sys/bus/pci/devices") {
            for e in entries.flatten() {
                let class = std::fs::read_to_string(e.path().join("class")).unwrap_or_default();
                let driver =
                    std::fs::read_link(e.path().join("driver")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
                if class.trim().starts_with("0x03") && driver.as_deref() == Some("vfio-pci") {
                    gpus.push(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
        gpus.sort();
        Self { cpus, memory_bytes, gpus }
    }
}

/// What is kept on disk for each VM.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct VmFile {
    id: String,
    tenant: String,
    name: String,
    external_ip: Option<Ipv4Addr>,
    /// The host port forwarded to the guest's probe port in the current boot.
    #[serde(default)]
    probe_port: Option<u16>,
    /// The restart requests acted on.
    #[serde(default)]
    restarts: i64,
}

/// One VM's runtime state.
struct Vm {
    dir: PathBuf,
    file: VmFile,
    /// The QEMU process we started or adopted, until we see it gone.
    pid: Option<i32>,
    console: Option<SerialConsole>,
    ready: Arc<AtomicBool>,
    probe: Option<JoinHandle<()>>,
    exit_watch: Option<JoinHandle<()>>,
    started: Option<Instant>,
    /// Set when a stop was asked: the moment to stop hard.
    stop_deadline: Option<Instant>,
    crashes: Vec<Instant>,
    degraded: Option<Reason>,
    /// A failure that stands until the spec (version) or power state changes.
    failed: Option<(i64, Reason)>,
}

impl Vm {
    fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    fn save(&self) -> Result<(), BackendError> {
        let text = serde_json::to_vec_pretty(&self.file).map_err(|e| BackendError::new("saving vm.json", e))?;
        std::fs::write(self.path("vm.json"), text).map_err(|e| BackendError::new("saving vm.json", e))
    }

    fn stop_runtime(&mut self) {
        for t in [self.probe.take(), self.exit_watch.take()].into_iter().flatten() {
            t.abort();
        }
        self.console = None;
        self.pid = None;
        self.started = None;
        self.stop_deadline = None;
        self.ready.store(false, Ordering::SeqCst);
    }

    fn observation(&self, phase: Phase) -> Observation {
        let mut o = Observation::new(phase);
        if self.pid.is_some() {
            o.internal_ip = Some(GUEST_IP.into());
        }
        o.external_ip = self.file.external_ip.map(|ip| ip.to_string());
        o.degraded = self.degraded.clone();
        o
    }
}

/// Whether process `pid` is a live QEMU of VM `id`.
fn alive(pid: i32, id: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name: "pid (comm) S ...".
    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    if matches!(state, None | Some('Z') | Some('X')) {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).contains(id)
}

fn kill(pid: i32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn free_local_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One readiness check through the probe forward on 127.0.0.1:`port`.
async fn probe_once(check: &ProbeCheck, port: u16, qmp: &Path) -> bool {
    let connect = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(("127.0.0.1", port)));
    let Ok(Ok(mut s)) = connect.await else { return false };
    match check {
        ProbeCheck::Http { path, .. } => {
            let req = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\nUser-Agent: vmaas-probe\r\n\r\n");
            if s.write_all(req.as_bytes()).await.is_err() {
                return false;
            }
            let mut buf = [0u8; 32];
            let read = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await;
            let Ok(Ok(n)) = read else { return false };
            let line = String::from_utf8_lossy(&buf[..n]);
            let code = line.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok());
            matches!(code, Some(200..=399))
        }
        ProbeCheck::Tcp { .. } => {
            // QEMU's user network accepts on the host side at once, whether or
            // not the guest listens. Ask QEMU whether its side of this
            // connection reached ESTABLISHED with the guest.
            let mut buf = [0u8; 1];
            match tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => return true,
                Ok(_) => return false,
                Err(_) => {}
            }
            let Ok(mut q) = Qmp::connect(qmp).await else { return false };
            let Ok(table) = q.execute("human-monitor-command", Some(serde_json::json!({"command-line": "info usernet"}))).await else {
                return false;
            };
            let established = usernet_established(table.as_str().unwrap_or(""), port);
            drop(s);
            established
        }
    }
}

/// Whether QEMU's user-network table shows an established TCP connection
/// through the host forward on 127.0.0.1:`port`.
fn usernet_established(table: &str, port: u16) -> bool {
    table.lines().any(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        cols.len() >= 4 && cols[0] == "TCP[ESTABLISHED]" && cols[2] == "127.0.0.1" && cols[3] == port.to_string()
    })
}

/// The first line of `console` that reports a kernel panic, if any.
fn panic_line(console: &str) -> Option<String> {
    console.lines().find(|l| l.contains("Kernel panic") || l.contains("PANIC: early exception")).map(|l| l.trim().to_owned())
}

/// The probe a VM is checked with: the template's, else a TCP check of the
/// first exposed TCP port, else none (ready once the guest prints on its console).
fn effective_probe(spec: &ResolvedSpec) -> Option<Probe> {
    spec.readiness_probe.clone().or_else(|| {
        spec.exposed_ports.iter().find(|p| p.protocol == Protocol::Tcp).map(|p| Probe {
            check: ProbeCheck::Tcp { port: p.port },
            period_seconds: 1,
            timeout_seconds: 300,
        })
    })
}

/// The qemu backend.
pub struct QemuBackend {
    cfg: QemuConfig,
    accel: AccelDecision,
    host: Host,
    pool: Mutex<IpPool>,
    vms: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Vm>>>>,
    wake: OnceLock<Arc<Notify>>,
}

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum QemuStartError {
    /// The state directory is unusable.
    #[error("VM state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// QEMU is not installed.
    #[error("{0} not found: install qemu-system-x86 (scripts/deps.sh does)")]
    NoQemu(PathBuf),
}

impl QemuBackend {
    /// Starts the backend: picks the accelerator and re-adopts the VMs
    /// that kept running while the server was down.
    pub async fn new(cfg: QemuConfig) -> Result<Self, QemuStartError> {
        std::fs::create_dir_all(&cfg.state_dir).map_err(|source| QemuStartError::StateDir { path: cfg.state_dir.clone(), source })?;
        let version = Command::new(&cfg.qemu).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().await;
        if !version.map(|s| s.success()).unwrap_or(false) {
            return Err(QemuStartError::NoQemu(cfg.qemu.clone()));
        }
        let accel = accel::detect(cfg.accel, &cfg.qemu, &cfg.state_dir).await;
        info!(accelerator = accel.accel.as_str(), reason = %accel.reason, "qemu accelerator chosen");
        let host = Host::probe();
        let backend =
            Self { pool: Mutex::new(IpPool::new(cfg.pool)), cfg, accel, host, vms: Mutex::new(HashMap::new()), wake: OnceLock::new() };
        backend.adopt_all().await;
        Ok(backend)
    }

    /// The accelerator in use.
    pub fn accel(&self) -> &AccelDecision {
        &self.accel
    }

    async fn adopt_all(&self) {
        let Ok(entries) = std::fs::read_dir(&self.cfg.state_dir) else { return };
        for e in entries.flatten() {
            let dir = e.path();
            let Ok(text) = std::fs::read(dir.join("vm.json")) else { continue };
            let Ok(file) = serde_json::from_slice::<VmFile>(&text) else {
                warn!(dir = %dir.display(), "ignoring a VM directory with an unreadable vm.json");
                continue;
            };
            if let Some(ip) = file.external_ip {
                if let Err(e) = self.pool.lock().unwrap_or_else(|p| p.into_inner()).reserve(ip, &file.id) {
                    warn!(vm = %file.id, error = %e, "external IP conflict");
                }
            }
            let mut vm = self.new_vm(dir, file);
            if let Some(pid) = read_pid(&vm.path("qemu.pid")).filter(|p| alive(*p, &vm.file.id)) {
                let status = match Qmp::connect(&vm.path("qmp.sock")).await {
                    Ok(mut q) => q.status().await.unwrap_or_else(|e| e.to_string()),
                    Err(e) => e.to_string(),
                };
                match SerialConsole::attach(&vm.path("serial.sock"), vm.path("console.log")).await {
                    Ok(c) => vm.console = Some(c),
                    Err(e) => warn!(vm = %vm.file.id, error = %e, "cannot reattach the serial console"),
                }
                vm.pid = Some(pid);
                vm.started = Some(Instant::now());
                info!(vm = %vm.file.id, name = %vm.file.name, pid, qemu_status = %status, "re-adopted a running VM");
            }
            let id = vm.file.id.clone();
            self.vms.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::new(tokio::sync::Mutex::new(vm)));
        }
    }

    fn new_vm(&self, dir: PathBuf, file: VmFile) -> Vm {
        Vm {
            dir,
            file,
            pid: None,
            console: None,
            ready: Arc::new(AtomicBool::new(false)),
            probe: None,
            exit_watch: None,
            started: None,
            stop_deadline: None,
            crashes: Vec::new(),
            degraded: None,
            failed: None,
        }
    }

    fn handle(&self, id: &str) -> Option<Arc<tokio::sync::Mutex<Vm>>> {
        self.vms.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    fn handle_for(&self, t: &VmTarget) -> Result<Arc<tokio::sync::Mutex<Vm>>, BackendError> {
        if let Some(h) = self.handle(&t.id) {
            return Ok(h);
        }
        let dir = self.cfg.state_dir.join(&t.id);
        std::fs::create_dir_all(&dir).map_err(|e| BackendError::new(format!("creating {}", dir.display()), e))?;
        let vm = self.new_vm(
            dir,
            VmFile {
                id: t.id.clone(),
                tenant: t.tenant.clone(),
                name: t.name.clone(),
                external_ip: None,
                probe_port: None,
                restarts: t.restarts,
            },
        );
        vm.save()?;
        let h = Arc::new(tokio::sync::Mutex::new(vm));
        Ok(self.vms.lock().unwrap_or_else(|p| p.into_inner()).entry(t.id.clone()).or_insert(h).clone())
    }

    fn wake(&self) -> Option<Arc<Notify>> {
        self.wake.get().cloned()
    }

    /// Why the host cannot run `spec`, if it cannot.
    fn capacity_problem(&self, spec: &ResolvedSpec) -> Option<Reason> {
        if !spec.gpus.is_empty() && self.host.gpus.len() < spec.gpus.len() {
            let asked: Vec<&str> = spec.gpus.iter().map(|g| g.device_name.as_str()).collect();
            return Some(Reason::new(
                "NoGPUAvailable",
                format!(
                    "the VM asks for {} GPU(s) ({}); this host has {} GPU(s) bound to vfio-pci",
                    spec.gpus.len(),
                    asked.join(", "),
                    self.host.gpus.len()
                ),
            ));
        }
        if spec.cpu_cores > self.host.cpus {
            return Some(Reason::new(
                "InsufficientCPU",
                format!("the VM asks for {} CPU cores; this host has {}", spec.cpu_cores, self.host.cpus),
            ));
        }
        if self.host.memory_bytes > 0 && spec.memory_bytes() > self.host.memory_bytes {
            return Some(Reason::new(
                "InsufficientMemory",
                format!("the VM asks for {} of memory; this host has {} MiB", spec.memory, self.host.memory_bytes >> 20),
            ));
        }
        None
    }

    async fn qemu_img(&self, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        let out = Command::new(&self.cfg.qemu_img)
            .args(args)
            .output()
            .await
            .map_err(|e| format!("running {}: {e}", self.cfg.qemu_img.display()))?;
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()) }
    }

    /// Boots the VM. Errors are reasons for FAILED.
    async fn boot(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), Reason> {
        let image = self.cfg.images.get(&t.spec.image).map_err(|m| Reason::new("ImageNotFound", m))?;
        let disk = vm.path("disk.qcow2");
        if !disk.exists() {
            let size = t.spec.disk_bytes().to_string();
            let base = std::fs::canonicalize(image.disk())
                .map_err(|e| Reason::new("ImageNotFound", format!("{}: {e}", image.disk().display())))?;
            self.qemu_img(&[
                "create".as_ref(),
                "-q".as_ref(),
                "-f".as_ref(),
                "qcow2".as_ref(),
                "-F".as_ref(),
                "qcow2".as_ref(),
                "-b".as_ref(),
                base.as_os_str(),
                disk.as_os_str(),
                size.as_ref(),
            ])
            .await
            .map_err(|m| Reason::new("DiskError", format!("creating the disk overlay ({} on {}): {m}", t.spec.disk_size, t.spec.image)))?;
        }
        let ext = match vm.file.external_ip {
            Some(ip) => ip,
            None => {
                let ip = self
                    .pool
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .allocate(&t.id)
                    .ok_or_else(|| Reason::new("NoExternalIP", "the external IP pool is exhausted"))?;
                vm.file.external_ip = Some(ip);
                vm.save().map_err(|e| Reason::new("StateError", e.to_string()))?;
                ip
            }
        };
        let probe = effective_probe(&t.spec);
        let probe_port = match &probe {
            Some(_) => Some(free_local_port().map_err(|e| Reason::new("PortForwardFailed", e.to_string()))?),
            None => None,
        };
        let mut netdev = format!("user,id=net0,net=10.0.2.0/24,dhcpstart={GUEST_IP},hostname={}", t.name);
        for p in &t.spec.exposed_ports {
            netdev.push_str(&format!(",hostfwd={}:{ext}:{}-:{}", p.protocol.as_str(), p.port, p.port));
        }
        if let (Some(port), Some(p)) = (probe_port, &probe) {
            netdev.push_str(&format!(",hostfwd=tcp:127.0.0.1:{port}-:{}", p.check.port()));
        }
        for f in ["qmp.sock", "serial.sock", "qemu.pid"] {
            let _ = std::fs::remove_file(vm.path(f));
        }
        let mem_mib = t.spec.memory_bytes().div_ceil(1 << 20);
        let mut cmd = Command::new(&self.cfg.qemu);
        cmd.arg("-name").arg(format!("vmaas-{},process=vmaas-{}", t.name, &t.id[..8.min(t.id.len())]));
        cmd.args(["-machine", "pc", "-accel", self.accel.accel.as_str()]);
        cmd.args(["-cpu", if self.accel.accel == Accel::Kvm { "host" } else { "max" }]);
        cmd.arg("-smp").arg(t.spec.cpu_cores.to_string()).arg("-m").arg(format!("{mem_mib}M"));
        cmd.args(["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]);
        if let Some(k) = image.kernel() {
            cmd.arg("-kernel").arg(k);
            if let Some(i) = image.initrd() {
                cmd.arg("-initrd").arg(i);
            }
            let base = image.manifest.cmdline.clone().unwrap_or_else(|| "console=ttyS0".into());
            cmd.arg("-append").arg(format!("{base} vmaas.name={} vmaas.id={}", t.name, t.id));
        }
        cmd.arg("-drive").arg(format!("if=none,id=disk0,file={},format=qcow2,cache=writeback,discard=unmap", disk.display()));
        cmd.args(["-device", "virtio-blk-pci,drive=disk0,bootindex=1"]);
        cmd.arg("-netdev").arg(&netdev).args(["-device", "virtio-net-pci,netdev=net0"]);
        cmd.arg("-chardev").arg(format!("socket,id=serial0,path={},server=on,wait=off", vm.path("serial.sock").display()));
        cmd.args(["-serial", "chardev:serial0"]);
        cmd.arg("-qmp").arg(format!("unix:{},server=on,wait=off", vm.path("qmp.sock").display()));
        for (i, addr) in self.host.gpus.iter().take(t.spec.gpus.len()).enumerate() {
            cmd.arg("-device").arg(format!("vfio-pci,host={addr},id=gpu{i}"));
        }
        cmd.arg("-daemonize").arg("-pidfile").arg(vm.path("qemu.pid"));
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let out = cmd.output().await.map_err(|e| Reason::new("QemuFailed", format!("running {}: {e}", self.cfg.qemu.display())))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            let reason = if err.contains("host forwarding") || err.contains("hostfwd") { "PortForwardFailed" } else { "QemuFailed" };
            return Err(Reason::new(reason, format!("QEMU refused to start: {err}")));
        }
        let pid = read_pid(&vm.path("qemu.pid")).ok_or_else(|| Reason::new("QemuFailed", "QEMU started but wrote no pid file"))?;
        vm.file.probe_port = probe_port;
        vm.save().map_err(|e| Reason::new("StateError", e.to_string()))?;
        vm.pid = Some(pid);
        vm.started = Some(Instant::now());
        vm.stop_deadline = None;
        vm.ready.store(false, Ordering::SeqCst);
        match SerialConsole::attach(&vm.path("serial.sock"), vm.path("console.log")).await {
            Ok(c) => vm.console = Some(c),
            Err(e) => warn!(vm = %t.id, error = %e, "cannot attach the serial console"),
        }
        self.start_probe(vm, probe, probe_port);
        self.watch_exit(vm, pid);
        info!(vm = %t.id, name = %t.name, pid, external_ip = %ext, accel = self.accel.accel.as_str(), "guest started");
        Ok(())
    }

    fn start_probe(&self, vm: &mut Vm, probe: Option<Probe>, port: Option<u16>) {
        if let Some(p) = vm.probe.take() {
            p.abort();
        }
        let ready = vm.ready.clone();
        let wake = self.wake();
        let log = vm.path("console.log");
        let qmp = vm.path("qmp.sock");
        vm.probe = Some(tokio::spawn(async move {
            loop {
                let ok = match (&probe, port) {
                    (Some(p), Some(port)) => probe_once(&p.check, port, &qmp).await,
                    // No probe: the guest answers once it prints on its console.
                    _ => std::fs::metadata(&log).map(|m| m.len() > 0).unwrap_or(false),
                };
                if ok {
                    ready.store(true, Ordering::SeqCst);
                    if let Some(w) = &wake {
                        w.notify_one();
                    }
                    return;
                }
                let period = probe.as_ref().map(|p| p.period_seconds).unwrap_or(1);
                tokio::time::sleep(Duration::from_millis(u64::from(period) * 1000 / 4).max(Duration::from_millis(200))).await;
            }
        }));
    }

    /// Asks the guest to power off (ACPI), or stops it hard once the grace period is over.
    async fn stop_step(&self, vm: &mut Vm, pid: i32) {
        match vm.stop_deadline {
            None => {
                vm.stop_deadline = Some(Instant::now() + self.cfg.stop_grace);
                let r = match Qmp::connect(&vm.path("qmp.sock")).await {
                    Ok(mut q) => q.execute("system_powerdown", None).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(()) => info!(vm = %vm.file.id, "ACPI power-down sent"),
                    Err(e) => {
                        warn!(vm = %vm.file.id, error = %e, "power-down failed; stopping hard");
                        kill(pid);
                    }
                }
            }
            Some(deadline) if Instant::now() >= deadline => {
                warn!(vm = %vm.file.id, grace = ?self.cfg.stop_grace, "the guest did not power off in time; stopping hard");
                if let Ok(mut q) = Qmp::connect(&vm.path("qmp.sock")).await {
                    let _ = q.execute("quit", None).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                if alive(pid, &vm.file.id) {
                    kill(pid);
                }
            }
            Some(_) => {}
        }
    }

    /// Wakes the reconciler as soon as `pid` exits, however it exits
    /// (powered off, crashed, killed), so the status follows at once.
    fn watch_exit(&self, vm: &mut Vm, pid: i32) {
        let Some(wake) = self.wake() else { return };
        let id = vm.file.id.clone();
        if let Some(w) = vm.exit_watch.take() {
            w.abort();
        }
        vm.exit_watch = Some(tokio::spawn(async move {
            while alive(pid, &id) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            wake.notify_one();
        }));
    }

    async fn ensure_vm(&self, vm: &mut Vm, t: &VmTarget) -> Result<Observation, BackendError> {
        let running = vm.pid.filter(|p| alive(*p, &t.id));
        if t.power == PowerState::Stopped {
            vm.failed = None;
            vm.degraded = None;
            vm.crashes.clear();
            return Ok(match running {
                Some(pid) => {
                    self.stop_step(vm, pid).await;
                    vm.observation(Phase::Stopping(Reason::new("PoweringOff", "the guest is powering off")))
                }
                None => {
                    vm.stop_runtime();
                    vm.observation(Phase::Stopped)
                }
            });
        }
        if let Some((version, reason)) = &vm.failed {
            if *version == t.version {
                return Ok(vm.observation(Phase::Failed(reason.clone())));
            }
            vm.failed = None;
            vm.crashes.clear();
        }
        if let Some(reason) = self.capacity_problem(&t.spec) {
            vm.failed = Some((t.version, reason.clone()));
            return Ok(vm.observation(Phase::Failed(reason)));
        }
        if let (Some(pid), true) = (running, t.restarts > vm.file.restarts) {
            vm.file.restarts = t.restarts;
            vm.save()?;
            info!(vm = %t.id, "restarting the guest");
            if let Ok(mut q) = Qmp::connect(&vm.path("qmp.sock")).await {
                let _ = q.execute("quit", None).await;
            }
            for _ in 0..50 {
                if !alive(pid, &t.id) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if alive(pid, &t.id) {
                kill(pid);
            }
            vm.stop_runtime();
            return match self.boot(vm, t).await {
                Ok(()) => Ok(vm.observation(Phase::Starting(Reason::new("Restarting", "the guest was restarted as asked and is booting")))),
                Err(reason) => {
                    vm.failed = Some((t.version, reason.clone()));
                    Ok(vm.observation(Phase::Failed(reason)))
                }
            };
        }
        if t.restarts > vm.file.restarts {
            // Not running: the boot below is the restart.
            vm.file.restarts = t.restarts;
            vm.save()?;
        }
        if let Some(pid) = running {
            if vm.probe.is_none() {
                // Re-adopted after a server restart: probe and watch it again.
                self.start_probe(vm, effective_probe(&t.spec), vm.file.probe_port);
                self.watch_exit(vm, pid);
            }
            if vm.stop_deadline.is_some() {
                // A stop is still under way: start again once it is done.
                return Ok(vm.observation(Phase::Stopping(Reason::new("PoweringOff", "finishing the previous power-off before starting"))));
            }
            if vm.ready.load(Ordering::SeqCst) {
                vm.degraded = None;
                return Ok(vm.observation(Phase::Ready));
            }
            if let Some(line) = vm.console.as_ref().and_then(|c| panic_line(&c.last_lines(12))) {
                // A kernel that panics early hangs instead of rebooting: stop it.
                kill(pid);
                let reason = Reason::new("GuestPanicked", format!("the guest kernel panicked: {line}"));
                vm.failed = Some((t.version, reason.clone()));
                return Ok(vm.observation(Phase::Failed(reason)));
            }
            let probe = effective_probe(&t.spec);
            let timeout = Duration::from_secs(u64::from(probe.as_ref().map(|p| p.timeout_seconds).unwrap_or(300)));
            if vm.started.is_some_and(|s| s.elapsed() > timeout) {
                let what = match probe.map(|p| p.check) {
                    Some(ProbeCheck::Http { port, path }) => format!("an HTTP GET of port {port}{path}"),
                    Some(ProbeCheck::Tcp { port }) => format!("a TCP connection to port {port}"),
                    None => "console output".into(),
                };
                let tail = vm.console.as_ref().map(|c| c.last_lines(3)).unwrap_or_default();
                let reason = Reason::new(
                    "ReadinessTimeout",
                    format!("the guest did not answer {what} within {timeout:?}; last console lines:\n{tail}"),
                );
                vm.failed = Some((t.version, reason.clone()));
                return Ok(vm.observation(Phase::Failed(reason)));
            }
            return Ok(vm.observation(Phase::Starting(Reason::new("Booting", "the guest is booting; waiting for its readiness probe"))));
        }
        // Not running, but it should be.
        let mut restarting = false;
        if vm.pid.is_some() {
            let tail = vm.console.as_ref().map(|c| c.last_lines(4)).unwrap_or_default();
            vm.stop_runtime();
            if let Some(line) = panic_line(&tail) {
                let reason = Reason::new("GuestPanicked", format!("the guest kernel panicked: {line}"));
                vm.failed = Some((t.version, reason.clone()));
                return Ok(vm.observation(Phase::Failed(reason)));
            }
            let now = Instant::now();
            vm.crashes.retain(|c| now.duration_since(*c) < Duration::from_secs(300));
            vm.crashes.push(now);
            if vm.crashes.len() >= 3 {
                let reason =
                    Reason::new("CrashLoop", format!("QEMU exited {} times in 5 minutes; last console lines:\n{tail}", vm.crashes.len()));
                vm.failed = Some((t.version, reason.clone()));
                return Ok(vm.observation(Phase::Failed(reason)));
            }
            warn!(vm = %t.id, "the guest's QEMU exited unexpectedly; restarting it");
            vm.degraded = Some(Reason::new(
                "GuestRestarted",
                format!("QEMU exited unexpectedly and was restarted ({} time(s) in 5 minutes)", vm.crashes.len()),
            ));
            restarting = true;
        } else {
            vm.stop_runtime();
        }
        match self.boot(vm, t).await {
            Ok(()) => {
                let reason = if restarting {
                    Reason::new("Restarting", "the guest is booting again")
                } else {
                    Reason::new("Booting", "the guest is booting")
                };
                Ok(vm.observation(Phase::Starting(reason)))
            }
            Err(reason) => {
                vm.failed = Some((t.version, reason.clone()));
                Ok(vm.observation(Phase::Failed(reason)))
            }
        }
    }

    async fn delete_vm(&self, id: &str) -> Result<(), BackendError> {
        let handle = self.handle(id);
        let dir = self.cfg.state_dir.join(id);
        let pid = match &handle {
            Some(h) => h.lock().await.pid,
            None => read_pid(&dir.join("qemu.pid")),
        };
        if let Some(pid) = pid.filter(|p| alive(*p, id)) {
            kill(pid);
            for _ in 0..100 {
                if !alive(pid, id) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if alive(pid, id) {
                return Err(BackendError::new("stopping the guest", format!("QEMU (pid {pid}) survives SIGKILL")));
            }
        }
        if let Some(h) = &handle {
            h.lock().await.stop_runtime();
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::new(format!("removing {}", dir.display()), e)),
        }
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).release(id);
        self.vms.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        info!(vm = %id, "guest deleted");
        Ok(())
    }
}

#[async_trait]
impl Backend for QemuBackend {
    fn name(&self) -> &'static str {
        "qemu"
    }

    fn health(&self) -> serde_json::Value {
        let running = self.vms.lock().map(|m| m.len()).unwrap_or(0);
        serde_json::json!({
            "accelerator": self.accel.accel.as_str(),
            "accelerator_reason": self.accel.reason,
            "images_dir": self.cfg.images.dir().display().to_string(),
            "host": self.host,
            "vms": running,
        })
    }

    fn attach(&self, wake: Arc<Notify>) {
        let _ = self.wake.set(wake);
    }

    async fn ensure(&self, t: &VmTarget) -> Result<Observation, BackendError> {
        let h = self.handle_for(t)?;
        let mut vm = h.lock().await;
        self.ensure_vm(&mut vm, t).await
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.delete_vm(id).await?;
        Ok(Cleanup::Done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        let on_disk: Vec<String> = std::fs::read_dir(&self.cfg.state_dir)
            .map_err(|e| BackendError::new("listing VM directories", e))?
            .flatten()
            .filter(|e| e.path().join("vm.json").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for id in on_disk.iter().filter(|id| !known.contains(id)) {
            warn!(vm = %id, "removing a VM that no longer exists in the store");
            self.delete_vm(id).await?;
        }
        Ok(())
    }

    async fn console(&self, id: &str) -> Result<Console, BackendError> {
        let h = self.handle(id).ok_or_else(|| BackendError::new("opening the console", "the VM has never run"))?;
        let vm = h.lock().await;
        vm.console.as_ref().map(SerialConsole::open).ok_or_else(|| BackendError::new("opening the console", "the VM is not running"))
    }

    async fn console_log(&self, id: &str) -> Result<Vec<u8>, BackendError> {
        if let Some(h) = self.handle(id) {
            let vm = h.lock().await;
            if let Some(c) = &vm.console {
                return Ok(c.history());
            }
            let data = std::fs::read(vm.path("console.log")).unwrap_or_default();
            return Ok(data[data.len().saturating_sub(console::RING)..].to_vec());
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_usernet_table() {
        let table = "Hub -1 (net0):\n  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\n  TCP[ESTABLISHED]   19       127.0.0.1 45269       10.0.2.15    22     0     0\n  TCP[SYN_SYNC]      20       127.0.0.1 45270       10.0.2.15    22     0     0\n  TCP[HOST_FORWARD]  14       127.0.0.1 45269       10.0.2.15    22     0     0\n";
        assert!(usernet_established(table, 45269));
        assert!(!usernet_established(table, 45270));
        assert!(!usernet_established(table, 1));
    }
}
