//! # vmaas-qemu
//!
//! The `qemu` backend: real VMs on this host, one QEMU process per VM,
//! supervised through a pidfd and controlled over QMP.
//!
//! - [`accel`]: KVM where it really works, else TCG.
//! - [`images`]: base images (a disk, and a kernel to boot directly).
//! - [`pool`]: external IPs from a loopback pool.
//! - [`host`]: what this host can give, and why it cannot run a VM.
//! - [`gpus`]: host GPUs passed through, each held by one VM at a time.
//! - [`argv`]: the typed QEMU command line (one device per disk and NIC).
//! - [`process`]: one QEMU process, watched through its pidfd.
//! - [`probe`]: readiness probes.
//! - [`console`]: the serial console, owned for the guest's whole life.
//! - [`display`]: the graphical console, VNC on a unix socket per VM.
//! - [`qmp`]: the QMP client.
//! - [`state`]: each VM's `vm.json`, written atomically.
//! - [`network`]: virtual networks and their address plans.
//! - [`subnet`]: subnets, each a running segment of the user-space switch.
//! - [`nat`] and [`egress`]: NAT gateways, and where they may take guests.
//! - [`balancer`] and [`proxy`]: load balancers, a TCP proxy per port over
//!   the targets that pass their probe; `forwards`: external IPs and
//!   balanced ports forwarded into running guests.
//! - [`import`] and [`vetting`]: images imported from a URL, an OCI
//!   registry (through `fetch_proxy`) or uploaded, streamed, hashed and
//!   checked (qcow2 or raw, reading no other file).
//! - [`volumes`]: volumes, one qcow2 file each outside every VM's directory.
//!
//! The VM driver, [`Vms`], keeps the table of VMs (each one's runtime
//! state in `vm`) and moves each towards its spec (`lifecycle`), through
//! parts that own their state and have their own errors:
//! - `launch`: a VM's QEMU started (image, disks, seed, command line), and
//!   the external IPs and GPUs launches take from the host;
//! - `clone`: template snapshots and the clones restored from them;
//! - `hotplug`: volumes on and off running guests; `pause`: guests frozen (QMP);
//! - `ports`: NICs on subnets, ports of the switch's segments;
//! - [`migrate`]: live migration of a running guest to a new QEMU process;
//! - [`live`] and [`resize`]: the limits to grow live, and the steps that grow it;
//! - `adopt` and `recover`: guests found on the host at start (state files
//!   rebuilt from the running QEMU), and the quarantine of VMs the store
//!   does not know, which are kept, never deleted behind an operator's back.
//!
//! Each VM has a directory `STATE/<id>/` with its disks (the root disk a
//! copy-on-write overlay of the image's base disk), its QMP and serial
//! sockets, its display's VNC socket, its pid file, its console log and
//! `vm.json`. QEMU runs daemonized, so VMs outlive a server restart; the
//! server re-adopts them from their pid files and sockets.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod accel;
mod adopt;
pub mod agent;
pub mod argv;
pub mod atomic;
pub mod balancer;
pub mod cidata;
mod clone;
pub mod console;
mod consoles;
pub mod disk_snapshots;
pub mod display;
pub mod egress;
mod export;
mod export_map;
mod fetch_proxy;
mod forwards;
mod gateway;
pub mod gpus;
pub mod hardware;
pub mod host;
mod hotplug;
pub mod images;
pub mod import;
mod io_error;
mod launch;
mod lifecycle;
pub mod live;
pub mod memory;
pub mod migrate;
pub mod nat;
pub mod network;
mod pause;
pub mod platform;
pub mod pool;
mod ports;
pub mod probe;
pub mod process;
pub mod proxy;
pub mod qmp;
mod recover;
pub mod resize;
mod snapshot;
pub mod sources;
pub mod state;
pub mod subnet;
pub mod vetting;
mod vm;
mod vm_snapshots;
pub mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::process::Command;
use tracing::{info, warn};
use vmaas_backend::{
    Backend, BackendError, Capabilities, Cleanup, Consoles, Driver, HostCapacity, NetworkDriver, Quarantined, Requests, Requeue,
    SubnetDriver, VmDriver, VmObservation, VmSpec, VmTarget, Wake,
};
use vmaas_model::ObjectKind;

use crate::accel::{AccelChoice, AccelDecision};
pub use crate::argv::GUEST_IP;
use crate::host::Host;
use crate::images::Catalog;
use crate::pool::Cidr;
use crate::state::VmFile;
use crate::vm::Vm;

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
    /// Networks whose guests may open connections beyond them, as the host
    /// ([`DEFAULT_NETWORK`] is the user network every VM has). Closed
    /// (`restrict=on`) for every other network.
    pub egress: Vec<String>,
    /// Physical L2 uplinks: a virtual network's id and the host TAP device
    /// or bridge its subnets' segments are joined to.
    pub uplinks: Vec<(String, String)>,
    /// The addresses images may be fetched from.
    pub image_sources: sources::SourcePolicy,
    /// Where the host's `/sys` is (GPUs are found under it).
    pub sysfs: PathBuf,
    /// Names of GPU models (a template's `device_name`, e.g.
    /// `nvidia.com/A10`) and the PCI ids they mean (`10de:2236`).
    pub gpu_aliases: BTreeMap<String, String>,
    /// Whether VMs of images with the clone hook start from template
    /// snapshots (see [`snapshot`](crate::snapshot)).
    pub snapshots: bool,
    /// TCG's translation cache of each clone in MiB; 0: QEMU's default.
    /// Smaller holds less memory per idle clone and runs it slower.
    pub clone_tcg_cache_mib: u32,
    /// OVMF and swtpm, for guests whose profile asks for EFI or a TPM.
    pub platform: platform::PlatformPaths,
    /// Where NAT gateways may take guests, and from which namespace.
    pub nat: Arc<egress::EgressPolicy>,
}

/// The network every VM's first NIC is on.
pub const DEFAULT_NETWORK: &str = "default";

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

/// The qemu backend.
pub struct QemuBackend {
    vms: Arc<Vms>,
    networks: Arc<network::Networks>,
    subnets: Arc<subnet::Subnets>,
    nats: Arc<nat::NatGateways>,
    balancers: Arc<balancer::Balancers>,
    volumes: Arc<volumes::Volumes>,
    imports: Arc<import::ImportDriver>,
}

/// The VM driver: every VM's runtime state, and what they share.
pub struct Vms {
    cfg: QemuConfig,
    accel: AccelDecision,
    host: Host,
    vms: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Vm>>>>,
    quarantine: Mutex<BTreeMap<String, Quarantined>>,
    wake: Arc<OnceLock<Wake>>,
    subnets: Arc<subnet::Subnets>,
    endpoints: Arc<balancer::Endpoints>,
    /// Volumes on VMs.
    plugs: hotplug::Plugs,
    /// NICs on subnets.
    ports: ports::Ports,
    /// Live migrations.
    migrations: migrate::Migrations,
    /// Starts QEMUs; holds the external IPs and GPUs they take.
    launcher: launch::Launcher,
    /// The forwards of VMs on subnets, through their gateways.
    gateway: gateway::GatewayForwards,
    /// Snapshots of VMs' disks.
    snapshots: disk_snapshots::DiskSnapshots,
}

impl QemuBackend {
    /// Starts the backend: picks the accelerator and re-adopts the VMs
    /// that kept running while the server was down.
    pub async fn new(cfg: QemuConfig) -> Result<Self, QemuStartError> {
        tokio::fs::create_dir_all(&cfg.state_dir)
            .await
            .map_err(|source| QemuStartError::StateDir { path: cfg.state_dir.clone(), source })?;
        let version = Command::new(&cfg.qemu).arg("--version").stderr(Stdio::null()).output().await;
        let qemu_version = match version {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_owned(),
            _ => return Err(QemuStartError::NoQemu(cfg.qemu.clone())),
        };
        let accel = accel::detect(cfg.accel, &cfg.qemu, &cfg.state_dir).await;
        info!(accelerator = accel.accel.as_str(), reason = %accel.reason, "qemu accelerator chosen");
        let host = Host::detect(cfg.sysfs.clone(), cfg.qemu.clone()).await;
        let data = cfg.state_dir.parent().unwrap_or(&cfg.state_dir).to_owned();
        let subnets = Arc::new(subnet::Subnets::new(data.join("subnets"), &cfg.uplinks));
        let volumes = Arc::new(volumes::Volumes::new(data.join("volumes"), cfg.images.clone(), cfg.qemu_img.clone(), data.join("images")));
        let gpus = gpus::Gpus::new(host.gpus.clone(), cfg.gpu_aliases.clone());
        let clones = clone::Clones::new(&cfg, data.join("snapshots"), qemu_version, accel.accel);
        let plugs = hotplug::Plugs::new(data.join("volumes"), cfg.qemu_img.clone());
        let ports = ports::Ports::new(subnets.clone(), data.join("sw"));
        let migrations = migrate::Migrations::new(cfg.qemu.clone(), cfg.platform.clone(), plugs.clone());
        let vms_qemu_img = cfg.qemu_img.clone();
        let launcher = launch::Launcher::new(&cfg, accel.accel, data.join("images"), gpus, clones, plugs.clone());
        let vms = Vms {
            cfg,
            accel,
            host,
            vms: Mutex::new(HashMap::new()),
            quarantine: Mutex::new(BTreeMap::new()),
            wake: Arc::new(OnceLock::new()),
            subnets: subnets.clone(),
            endpoints: Arc::new(balancer::Endpoints::default()),
            plugs,
            ports,
            migrations,
            launcher,
            gateway: gateway::GatewayForwards::default(),
            snapshots: disk_snapshots::DiskSnapshots::new(data.join("disk-snapshots"), vms_qemu_img),
        };
        let snapshot_dir = data.join("snapshots");
        let _ = tokio::task::spawn_blocking(move || snapshot::clean_up_after_crash(&snapshot_dir)).await;
        let exports = data.clone();
        let _ = tokio::task::spawn_blocking(move || export::clean_up(&exports)).await;
        vms.adopt_all().await;
        let networks = network::Networks::new(data.join("networks"));
        let balancers = Arc::new(balancer::Balancers::new(vms.endpoints.clone(), vms.wake.clone()));
        let imports = Arc::new(import::ImportDriver(Arc::new(import::Imports::new(
            data.join("images"),
            vms.wake.clone(),
            Arc::new(vms.cfg.image_sources.clone()),
        ))));
        let nats = Arc::new(nat::NatGateways::new(subnets.clone(), vms.cfg.nat.clone()));
        Ok(Self { vms: Arc::new(vms), networks: Arc::new(networks), subnets, nats, balancers, volumes, imports })
    }

    /// The accelerator in use.
    pub fn accel(&self) -> &AccelDecision {
        &self.vms.accel
    }
}

impl Vms {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<Vm>>>> {
        self.vms.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn quarantine_lock(&self) -> MutexGuard<'_, BTreeMap<String, Quarantined>> {
        self.quarantine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server's data directory (VMs, volumes, snapshots and exports are under it).
    fn data_dir(&self) -> PathBuf {
        self.cfg.state_dir.parent().unwrap_or(&self.cfg.state_dir).to_owned()
    }

    /// Where volume files are.
    fn volume_dir(&self) -> PathBuf {
        self.data_dir().join("volumes")
    }

    fn handle(&self, id: &str) -> Option<Arc<tokio::sync::Mutex<Vm>>> {
        self.map().get(id).cloned()
    }

    fn forget(&self, id: &str) {
        self.map().remove(id);
        self.gateway.clear(id);
        self.endpoints.remove(id);
        self.quarantine_lock().remove(id);
    }

    /// What a running guest is connected to beside its QEMU's own start:
    /// its extra forwards, its external address's endpoint, its volumes
    /// (where each is, and whether an unplug is under way).
    async fn connect_devices(&self, vm: &mut Vm, t: &VmTarget) -> Result<(vmaas_backend::VolumePresence, bool), BackendError> {
        self.sync_forwards(vm, t).await?;
        if let Some(own) = vm.file.external_ip {
            self.endpoints.set(&t.id, own, vm.ready.clone());
        }
        Ok(self.plugs.sync(vm, t).await?)
    }

    /// Gives a running guest the extra forwards `t` asks for: QEMU's, or
    /// on a subnet the gateway's ([`gateway`]).
    async fn sync_forwards(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), BackendError> {
        let (Some(own), Some(nic), true) = (vm.file.external_ip, t.spec.machine.nics.first(), vm.is_running()) else {
            self.gateway.clear(&t.id);
            return Ok(());
        };
        let netdev = format!("nic-{}", nic.name);
        let mut wanted = forwards::wanted(t, own);
        let Some(a) = t.spec.attachments.first() else {
            self.gateway.clear(&t.id);
            return forwards::sync(vm, &netdev, wanted).await;
        };
        wanted.retain(gateway::stays_in_qemu);
        forwards::sync(vm, &netdev, wanted).await?;
        let segment = self.subnets.segment(&a.subnet).ok_or_else(|| {
            BackendError::transient("forwarding through the subnet's gateway", format!("subnet {} has no running segment yet", a.subnet))
        })?;
        self.gateway.sync(vm, &netdev, &segment, a.ip, &gateway::gateway_forwards(t, own)).await
    }

    /// Marks `vm` as asked for, and fills in what a rebuilt state file lacks.
    async fn claim(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), BackendError> {
        vm.claimed = true;
        if vm.recovered {
            vm.file.tenant = t.tenant.clone();
            vm.file.name = t.name.clone();
            vm.file.restarts = t.spec.requests.restart;
            vm.file.migrations = t.spec.requests.migrate;
            vm.file.restores = t.spec.requests.restore;
            vm.file.save(&vm.dir).await?;
            vm.recovered = false;
            info!(vm = %t.id, "recovered VM state completed from the store");
        }
        Ok(())
    }

    async fn handle_for(&self, t: &VmTarget) -> Result<Arc<tokio::sync::Mutex<Vm>>, BackendError> {
        if let Some(h) = self.handle(&t.id) {
            return Ok(h);
        }
        let dir = self.cfg.state_dir.join(&t.id);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| BackendError::transient(format!("creating {}", dir.display()), e))?;
        let file = VmFile {
            id: t.id.clone(),
            tenant: t.tenant.clone(),
            name: t.name.clone(),
            external_ip: None,
            probe_port: None,
            restarts: t.spec.requests.restart,
            ready_pid: None,
            forwards: Vec::new(),
            booted: None,
            volumes: Vec::new(),
            gpus: Vec::new(),
            migrations: t.spec.requests.migrate,
            restores: t.spec.requests.restore,
            restore_ms: None,
            nic_ports: Vec::new(),
            snapshot: None,
            plugged: Vec::new(),
            tpm_state: None,
            live: None,
        };
        file.save(&dir).await?;
        let h = Arc::new(tokio::sync::Mutex::new(Vm::new(dir, file)));
        Ok(self.map().entry(t.id.clone()).or_insert(h).clone())
    }
}

impl Backend for QemuBackend {
    fn name(&self) -> &'static str {
        "qemu"
    }

    fn unsupported(&self, machine: &vmaas_model::MachineSpec) -> Vec<(String, String)> {
        hardware::unsupported(machine, &self.vms.host.machine_types)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kinds: vec![
                ObjectKind::VirtualMachine,
                ObjectKind::VirtualNetwork,
                ObjectKind::Subnet,
                ObjectKind::SecurityGroup,
                ObjectKind::ExternalIp,
                ObjectKind::ExternalIpAttachment,
                ObjectKind::LoadBalancer,
                ObjectKind::NatGateway,
                ObjectKind::Volume,
                ObjectKind::VolumeAttachment,
                ObjectKind::Image,
                ObjectKind::ComputeInstanceSnapshot,
            ],
            live_migration: true,
            gpus: !self.vms.host.gpus.is_empty(),
            console: true,
            restores: true,
            clones: true,
            pause: true,
            // One host's networks are its own switches: no physical network to name.
            network_classes: Vec::new(),
        }
    }

    fn health(&self) -> serde_json::Value {
        let v = &self.vms;
        serde_json::json!({
            "accelerator": v.accel.accel.as_str(),
            "accelerator_reason": v.accel.reason,
            "images_dir": v.cfg.images.dir().display().to_string(),
            "host": v.host,
            "vms": v.map().len(),
            "capabilities": self.capabilities(),
        })
    }

    fn attach(&self, wake: Wake) {
        let _ = self.vms.wake.set(wake);
    }

    fn vms(&self) -> Arc<VmDriver> {
        self.vms.clone()
    }

    fn networks(&self) -> Option<Arc<NetworkDriver>> {
        Some(self.networks.clone())
    }

    fn subnets(&self) -> Option<Arc<SubnetDriver>> {
        Some(self.subnets.clone())
    }

    fn load_balancers(&self) -> Option<Arc<vmaas_backend::BalancerDriver>> {
        Some(self.balancers.clone())
    }

    fn nat_gateways(&self) -> Option<Arc<vmaas_backend::NatDriver>> {
        Some(self.nats.clone())
    }

    fn image_imports(&self) -> Option<Arc<vmaas_backend::ImageDriver>> {
        Some(self.imports.clone())
    }

    fn image_uploads(&self) -> Option<Arc<dyn vmaas_backend::ImageUploads>> {
        Some(self.imports.clone())
    }

    fn volumes(&self) -> Option<Arc<vmaas_backend::VolumeDriver>> {
        Some(self.volumes.clone())
    }

    fn snapshots(&self) -> Option<Arc<vmaas_backend::SnapshotDriver>> {
        Some(Arc::new(vm_snapshots::SnapshotDriver(self.vms.clone())))
    }

    fn exports(&self) -> Option<Arc<dyn vmaas_backend::Exports>> {
        Some(Arc::new(export::Exporter(self.vms.clone())))
    }

    fn consoles(&self) -> Option<Arc<dyn Consoles>> {
        Some(self.vms.clone())
    }

    /// Snapshots whole in its data directory (its VMs are its inventory).
    fn holds(&self, kind: ObjectKind, id: &str) -> bool {
        kind == ObjectKind::ComputeInstanceSnapshot && self.vms.snapshots.holds(id)
    }

    fn inventory(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.vms.map().keys().cloned().collect();
        ids.sort();
        ids
    }

    fn quarantine(&self) -> Vec<Quarantined> {
        self.vms.quarantine_lock().values().cloned().collect()
    }

    fn capacity(&self) -> Option<HostCapacity> {
        let disk_bytes = rustix::fs::statvfs(&self.vms.cfg.state_dir).map(|s| s.f_blocks.saturating_mul(s.f_frsize)).unwrap_or(0);
        let h = &self.vms.host;
        Some(HostCapacity { cpus: h.cpus, memory_bytes: h.memory_bytes, disk_bytes })
    }

    fn images(&self) -> Option<Vec<vmaas_backend::CatalogImage>> {
        Some(self.vms.cfg.images.list())
    }

    fn held_addresses(&self) -> Option<std::collections::HashSet<std::net::Ipv4Addr>> {
        Some(pool::held_on_host())
    }

    fn memory(&self) -> Vec<vmaas_backend::VmMemory> {
        self.vms.memory_of_vms()
    }
}

#[async_trait]
impl Driver<VmSpec, VmObservation> for Vms {
    async fn ensure(&self, t: &VmTarget) -> Result<(VmObservation, Requeue), BackendError> {
        let h = self.handle_for(t).await?;
        let mut vm = h.lock().await;
        self.claim(&mut vm, t).await?;
        vm.segment_nics = self.ports.attach(&mut vm, t).await?;
        vm.attached_ip = t.spec.attachments.first().map(|a| a.ip);
        vm.nic_ips = t.spec.attachments.iter().map(|a| a.ip).collect();
        vm.attached_external = t.spec.external_ips.first().copied();
        let mut ensured = self.ensure_vm(&mut vm, t).await?;
        let (volumes, unplugging) = match self.connect_devices(&mut vm, t).await {
            // Its QEMU exited while these steps spoke to it (killed, say):
            // the guest failed, not the backend. It is looked at again now,
            // as the next pass would (and healed), instead of the QMP error
            // being reported.
            Err(e) if vm.exited_meanwhile().await => {
                info!(vm = %t.id, error = %e, "the guest's QEMU exited while its devices were set up");
                ensured = self.ensure_vm(&mut vm, t).await?;
                self.connect_devices(&mut vm, t).await?
            }
            r => r?,
        };
        let (mut observation, mut requeue) = ensured;
        vm.describe(&t.spec.machine, &mut observation);
        if unplugging && !matches!(requeue, Requeue::After(d) if d <= hotplug::UNPLUG_STEP) {
            requeue = Requeue::after(hotplug::UNPLUG_STEP);
        }
        Ok((
            VmObservation {
                observation,
                acted: Requests { restart: vm.file.restarts, migrate: vm.file.migrations, restore: vm.file.restores },
                volumes,
            },
            requeue,
        ))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.delete_vm(id).await?;
        Ok(Cleanup::Done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        self.quarantine_unknown(known).await
    }
}
