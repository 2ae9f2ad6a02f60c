//! One VM's runtime state: its directory and state file, the QEMU it
//! runs, its console, readiness and what went wrong (the steps that move
//! it are in `lifecycle`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tokio::task::JoinHandle;
use vmaas_model::{Observation, Phase, Reason};

use crate::argv::GUEST_IP;
use crate::console::SerialConsole;
use crate::process::Process;
use crate::state::VmFile;

/// The boot disk's file in a VM's directory (a qcow2 overlay of its image).
pub(crate) const BOOT_DISK: &str = "disk.qcow2";

/// One VM's runtime state.
pub(crate) struct Vm {
    pub(crate) dir: PathBuf,
    pub(crate) file: VmFile,
    /// The QEMU process we started or adopted, until we see it gone.
    pub(crate) process: Option<Arc<Process>>,
    pub(crate) console: Option<SerialConsole>,
    pub(crate) ready: Arc<AtomicBool>,
    pub(crate) probe: Option<JoinHandle<()>>,
    pub(crate) exit_watch: Option<JoinHandle<()>>,
    /// Listens to its QEMU's events ([`crate::io_error::watch`]).
    pub(crate) event_watch: Option<JoinHandle<()>>,
    /// Its guest was frozen by a write the host could not take, and has
    /// not gone on since, as QEMU's events said.
    pub(crate) io_frozen: Arc<AtomicBool>,
    pub(crate) started: Option<Instant>,
    /// Set when a stop was asked: the moment to stop hard.
    pub(crate) stop_deadline: Option<Instant>,
    pub(crate) crashes: Vec<Instant>,
    pub(crate) degraded: Option<Reason>,
    /// A failure that stands until the spec (version) or power state changes.
    pub(crate) failed: Option<(i64, Reason)>,
    /// The state file was rebuilt from the host: the first `ensure` fills in
    /// what only the store knows.
    pub(crate) recovered: bool,
    /// The reconciler has asked for this VM since the server started: it is
    /// not a candidate for quarantine.
    pub(crate) claimed: bool,
    /// Its NICs on subnets, as QEMU arguments.
    pub(crate) segment_nics: Vec<crate::argv::SegmentNicArg>,
    /// The address of its first NIC on a subnet: its internal address.
    pub(crate) attached_ip: Option<std::net::Ipv4Addr>,
    /// The addresses of its NICs on subnets, in order.
    pub(crate) nic_ips: Vec<std::net::Ipv4Addr>,
    /// The first external IP attached to it: its external address.
    pub(crate) attached_external: Option<std::net::Ipv4Addr>,
    /// Why the last live migration failed, until one succeeds.
    pub(crate) migration_failed: Option<Reason>,
    /// How the running QEMU was started, when this server started it.
    pub(crate) boot: Option<crate::clone::BootPath>,
    /// Its guest was frozen by a pause (QMP `stop`), and not let go on yet.
    pub(crate) paused: bool,
    /// Held by each export of its disk under way that reads the disk in
    /// place ([`Vm::exported`]).
    pub(crate) exporting: Arc<()>,
}

impl Vm {
    pub(crate) fn new(dir: PathBuf, file: VmFile) -> Self {
        Self {
            dir,
            file,
            process: None,
            console: None,
            ready: Arc::new(AtomicBool::new(false)),
            probe: None,
            exit_watch: None,
            event_watch: None,
            io_frozen: Arc::new(AtomicBool::new(false)),
            started: None,
            stop_deadline: None,
            crashes: Vec::new(),
            degraded: None,
            failed: None,
            recovered: false,
            claimed: false,
            segment_nics: Vec::new(),
            attached_ip: None,
            attached_external: None,
            nic_ips: Vec::new(),
            migration_failed: None,
            boot: None,
            paused: false,
            exporting: Arc::new(()),
        }
    }

    /// Whether an export reads its disk in place now: until it ends, the
    /// guest does not boot and no restore writes the disk.
    pub(crate) fn exported(&self) -> bool {
        Arc::strong_count(&self.exporting) > 1
    }

    /// Whether `t` asks for a restore of this VM not made yet.
    pub(crate) fn restore_asked(&self, t: &vmaas_backend::VmTarget) -> bool {
        t.spec.restore_from.is_some() && t.spec.requests.restore > self.file.restores
    }

    /// How its running QEMU was started, for its status (after a server
    /// restart only a restore is known, from the state file).
    pub(crate) fn boot_note(&self) -> Option<String> {
        let restored = || self.file.snapshot.clone().map(crate::clone::BootPath::Restored);
        self.boot.clone().or_else(restored).map(|b| b.note())
    }

    pub(crate) fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    /// The file of the machine's disk `d`: [`BOOT_DISK`] for the disk made
    /// from the image, `disk-NAME.qcow2` for the others.
    pub(crate) fn disk_file(&self, d: &vmaas_model::Disk) -> PathBuf {
        if d.source == vmaas_model::DiskSource::Image { self.path(BOOT_DISK) } else { self.path(&format!("disk-{}.qcow2", d.name)) }
    }

    /// Takes over a QEMU that kept running while the server was down; a
    /// guest that had passed its probe in this process is ready at once.
    pub(crate) fn adopt(&mut self, process: Process, console: Option<SerialConsole>) {
        self.ready.store(self.file.ready_pid == Some(process.pid()), Ordering::SeqCst);
        self.process = Some(Arc::new(process));
        self.console = console;
        self.started = Some(Instant::now());
    }

    /// Whether the guest runs (for reports).
    pub(crate) fn is_running(&self) -> bool {
        self.running().is_some()
    }

    pub(crate) fn stop_runtime(&mut self) {
        for t in [self.probe.take(), self.exit_watch.take(), self.event_watch.take()].into_iter().flatten() {
            t.abort();
        }
        self.io_frozen.store(false, Ordering::SeqCst);
        self.console = None;
        self.process = None;
        self.started = None;
        self.stop_deadline = None;
        self.ready.store(false, Ordering::SeqCst);
    }

    pub(crate) fn observation(&self, phase: Phase) -> Observation {
        let mut o = Observation::new(phase);
        if self.process.is_some() {
            o.internal_ip = Some(self.attached_ip.map(|ip| ip.to_string()).unwrap_or_else(|| GUEST_IP.into()));
            o.nic_ips = self.nic_ips.iter().map(ToString::to_string).collect();
        }
        o.external_ip = self.attached_external.or(self.file.external_ip).map(|ip| ip.to_string());
        o.degraded = self.degraded.clone().or_else(|| self.migration_failed.clone().filter(|_| self.process.is_some()));
        o
    }

    /// What the running guest adds to `o`: whether it needs a restart to
    /// match `machine`, how it booted, and whether it can live-migrate.
    pub(crate) fn describe(&self, machine: &vmaas_model::MachineSpec, o: &mut Observation) {
        o.restart_required = self.restart_required(machine);
        o.boot = self.boot_note();
        o.migratable = self.running().map(|_| vmaas_model::vm::migratable::Migratability::of_machine(machine));
    }

    /// Why the running guest needs a restart to match `machine`, if it does.
    fn restart_required(&self, machine: &vmaas_model::MachineSpec) -> Option<Reason> {
        self.running()?;
        let changes = self.file.booted.as_ref()?.pending(&vmaas_model::boot_shape::BootShape::of(machine))?;
        Some(Reason::new("ConfigurationChanged", format!("{changes}: takes effect at the next restart")))
    }

    pub(crate) fn running(&self) -> Option<Arc<Process>> {
        self.process.as_ref().filter(|p| !p.has_exited()).cloned()
    }

    /// Whether its QEMU, running a moment ago, has exited (given a second
    /// to be seen gone: its monitor closes as it dies, before its exit shows).
    pub(crate) async fn exited_meanwhile(&self) -> bool {
        match &self.process {
            Some(p) => tokio::time::timeout(std::time::Duration::from_secs(1), p.exited()).await.is_ok(),
            None => false,
        }
    }

    pub(crate) fn console_tail(&self, lines: usize) -> String {
        self.console.as_ref().map(|c| c.last_lines(lines)).unwrap_or_default()
    }
}
