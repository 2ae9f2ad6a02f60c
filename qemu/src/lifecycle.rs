//! One VM's life: its runtime state, and the steps `ensure` takes towards
//! the spec (power off, stay failed, restart, watch a running guest, heal a
//! crashed one, boot). A step that cannot go on returns [`Stop::Failed`],
//! and one place turns that into the standing FAILED observation.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tracing::{info, warn};
use vmaas_backend::{BackendError, Requeue, VmTarget};
use vmaas_model::{ObjectKind, Observation, Phase, PowerState, Reason};

use crate::Vms;
use crate::console::SerialConsole;
use crate::probe::{self, ProbeJob, effective_probe, panic_line};
use crate::process::Process;
use crate::qmp::Qmp;
use crate::vm::Vm;

/// How often a VM on its way somewhere is looked at again.
const STEP: Duration = Duration::from_millis(500);

/// Why a step could not go on.
pub(crate) enum Stop {
    /// The VM cannot run as it is: FAILED until its spec changes.
    Failed(Reason),
    /// The backend failed.
    Backend(BackendError),
}

impl From<BackendError> for Stop {
    fn from(e: BackendError) -> Self {
        Self::Backend(e)
    }
}

impl From<crate::launch::LaunchError> for Stop {
    fn from(e: crate::launch::LaunchError) -> Self {
        match e {
            crate::launch::LaunchError::Transient(b) => Stop::Backend(b),
            crate::launch::LaunchError::Gpus(r) => Stop::Failed(r),
            e @ crate::launch::LaunchError::AddressTaken(_) => Stop::Backend(BackendError::transient("starting QEMU", e)),
            e => Stop::Failed(Reason::new(e.reason(), e.to_string())),
        }
    }
}

type Step = Result<(Observation, Requeue), Stop>;

fn starting(reason: &str, message: &str) -> Phase {
    Phase::Starting(Reason::new(reason, message))
}

/// A guest frozen by a write its host could not take: still READY if it
/// was, else still booting (its readiness time counted again from now,
/// not while frozen); DEGRADED saying why either way, and looked at again
/// soon, to let it go on once there is room.
fn frozen(vm: &mut Vm, reason: Reason) -> (Observation, Requeue) {
    let phase = if vm.ready.load(Ordering::SeqCst) {
        Phase::Ready
    } else {
        vm.started = Some(Instant::now());
        Phase::Starting(reason.clone())
    };
    let mut o = vm.observation(phase);
    o.degraded = Some(reason);
    (o, Requeue::after(crate::io_error::RECHECK))
}

impl Vms {
    /// Makes one step towards `t` for `vm`.
    pub(crate) async fn ensure_vm(&self, vm: &mut Vm, t: &VmTarget) -> Result<(Observation, Requeue), BackendError> {
        if vm.exported() && (t.spec.power != PowerState::Stopped || vm.restore_asked(t)) {
            let phase = starting("DiskExported", "its disk is being exported; it boots (or is restored) once the export ends");
            return Ok((vm.observation(phase), Requeue::after(STEP)));
        }
        if let Err(reason) = self.restore_step(vm, t).await {
            vm.failed = Some((t.version, reason.clone()));
            return Ok((vm.observation(Phase::Failed(reason)), Requeue::AwaitChange));
        }
        if t.spec.power != PowerState::Paused {
            crate::pause::resume(vm).await?;
        }
        if t.spec.power == PowerState::Stopped {
            return Ok(self.ensure_stopped(vm, self.grace(t)).await);
        }
        if t.spec.power == PowerState::Paused && vm.running().is_some() && vm.stop_deadline.is_none() {
            return Ok((crate::pause::pause(vm).await?, Requeue::AwaitChange));
        }
        if let Some((version, reason)) = &vm.failed {
            if *version == t.version {
                return Ok((vm.observation(Phase::Failed(reason.clone())), Requeue::AwaitChange));
            }
            vm.failed = None;
            vm.crashes.clear();
        }
        match self.ensure_started(vm, t).await {
            Ok(step) => Ok(step),
            Err(Stop::Backend(e)) => Err(e),
            Err(Stop::Failed(reason)) => {
                vm.failed = Some((t.version, reason.clone()));
                Ok((vm.observation(Phase::Failed(reason)), Requeue::AwaitChange))
            }
        }
    }

    /// How long `t`'s guest has to power off: its template's grace
    /// period, else the server's `--stop-grace`.
    fn grace(&self, t: &VmTarget) -> std::time::Duration {
        let asked = t.spec.machine.hardware.termination_grace_period_seconds;
        asked.map(|s| std::time::Duration::from_secs(s.into())).unwrap_or(self.cfg.stop_grace)
    }

    async fn ensure_stopped(&self, vm: &mut Vm, grace: std::time::Duration) -> (Observation, Requeue) {
        vm.failed = None;
        vm.degraded = None;
        vm.crashes.clear();
        match vm.running() {
            Some(p) => {
                self.stop_step(vm, &p, grace).await;
                (vm.observation(starting_stop()), Requeue::after(STEP))
            }
            None => {
                vm.stop_runtime();
                self.launcher.gpus().release(&vm.file.id);
                (vm.observation(Phase::Stopped), Requeue::AwaitChange)
            }
        }
    }

    async fn ensure_started(&self, vm: &mut Vm, t: &VmTarget) -> Step {
        if let Some(reason) = self.host.capacity_problem(&t.spec.machine) {
            return Err(Stop::Failed(reason));
        }
        if t.spec.requests.restart > vm.file.restarts {
            vm.file.restarts = t.spec.requests.restart;
            vm.file.save(&vm.dir).await?;
            if let Some(p) = vm.running() {
                info!(vm = %t.id, "restarting the guest");
                self.power_off(vm, &p, self.grace(t)).await;
                vm.stop_runtime();
                self.boot(vm, t).await?;
                let phase = starting("Restarting", "the guest was restarted as asked and is booting");
                return Ok((vm.observation(phase), Requeue::after(STEP)));
            }
        }
        if t.spec.requests.migrate > vm.file.migrations {
            self.migrate_step(vm, t).await?;
        }
        if vm.running().is_some() && vm.ready.load(Ordering::SeqCst) {
            crate::resize::step(vm, t).await?;
        }
        match vm.running() {
            Some(p) => self.watch_running(vm, t, &p).await,
            None => self.heal_or_boot(vm, t).await,
        }
    }

    /// Acts on a live-migration request: a ready guest moves to a new QEMU;
    /// a failure leaves it where it was, DEGRADED saying why. A guest that
    /// still boots moves once it is ready; one that does not run stays.
    async fn migrate_step(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), Stop> {
        if vm.running().is_some() && !vm.ready.load(Ordering::SeqCst) {
            info!(vm = %t.id, "live migration waits: the guest is not ready yet");
            return Ok(());
        }
        vm.file.migrations = t.spec.requests.migrate;
        vm.file.save(&vm.dir).await?;
        if vm.running().is_none() {
            info!(vm = %t.id, "live migration dropped: the guest is not running");
            return Ok(());
        }
        match self.migrations.migrate(vm, t).await {
            Ok(m) => {
                info!(vm = %t.id, downtime_ms = m.downtime_ms, total_ms = m.total_ms, "live migration done");
                vm.migration_failed = None;
            }
            Err(why) => {
                warn!(vm = %t.id, error = %why, "live migration failed");
                vm.migration_failed =
                    Some(Reason::new("MigrationFailed", format!("the live migration failed; the guest stays where it was: {why}")));
            }
        }
        Ok(())
    }

    /// A guest is running: is it ready, panicked, too slow, or still booting?
    async fn watch_running(&self, vm: &mut Vm, t: &VmTarget, p: &Arc<Process>) -> Step {
        if vm.probe.is_none() {
            // Re-adopted after a server restart: a guest that answers now is
            // ready in the first report (no PROGRESSING flap); probe and
            // watch it again.
            if !vm.ready.load(Ordering::SeqCst) && probe::check(&probe_job(vm, t)).await {
                vm.ready.store(true, Ordering::SeqCst);
            }
            self.start_probe(vm, t);
            self.watch_exit(vm, p);
            self.watch_events(vm);
            if crate::io_error::frozen_now(vm).await {
                vm.io_frozen.store(true, Ordering::SeqCst);
            }
        }
        if vm.stop_deadline.is_some() {
            let phase = Phase::Stopping(Reason::new("PoweringOff", "finishing the previous power-off before starting"));
            return Ok((vm.observation(phase), Requeue::after(STEP)));
        }
        if let Some(reason) = crate::io_error::check(vm).await? {
            return Ok(frozen(vm, reason));
        }
        if vm.ready.load(Ordering::SeqCst) {
            if vm.file.ready_pid != Some(p.pid()) {
                vm.file.ready_pid = Some(p.pid());
                vm.file.save(&vm.dir).await?;
            }
            vm.degraded = None;
            return Ok((vm.observation(Phase::Ready), Requeue::AwaitChange));
        }
        if let Some(line) = panic_line(&vm.console_tail(12)) {
            // A kernel that panics early hangs instead of rebooting: stop it.
            p.kill();
            return Err(Stop::Failed(Reason::new("GuestPanicked", format!("the guest kernel panicked: {line}"))));
        }
        let probe = effective_probe(&t.spec.machine);
        let timeout = Duration::from_secs(u64::from(probe.as_ref().map(|p| p.timeout_seconds).unwrap_or(300)));
        if vm.started.is_some_and(|s| s.elapsed() > timeout) {
            let message = format!(
                "the guest did not answer {} within {timeout:?}; last console lines:\n{}",
                probe::describe(probe.as_ref()),
                vm.console_tail(3)
            );
            return Err(Stop::Failed(Reason::new("ReadinessTimeout", message)));
        }
        Ok((vm.observation(starting("Booting", "the guest is booting; waiting for its readiness probe")), Requeue::after(STEP)))
    }

    /// Not running, but it should be: heal a crash (or give up on a crash
    /// loop or a panic), or boot for the first time.
    async fn heal_or_boot(&self, vm: &mut Vm, t: &VmTarget) -> Step {
        let crashed = vm.process.is_some();
        let tail = vm.console_tail(4);
        vm.stop_runtime();
        if !crashed {
            self.boot(vm, t).await?;
            return Ok((vm.observation(starting("Booting", "the guest is booting")), Requeue::after(STEP)));
        }
        if let Some(line) = panic_line(&tail) {
            return Err(Stop::Failed(Reason::new("GuestPanicked", format!("the guest kernel panicked: {line}"))));
        }
        let now = Instant::now();
        vm.crashes.retain(|c| now.duration_since(*c) < Duration::from_secs(300));
        vm.crashes.push(now);
        if vm.crashes.len() >= 3 {
            let message = format!("QEMU exited {} times in 5 minutes; last console lines:\n{tail}", vm.crashes.len());
            return Err(Stop::Failed(Reason::new("CrashLoop", message)));
        }
        warn!(vm = %t.id, "the guest's QEMU exited unexpectedly; restarting it");
        let message = format!("QEMU exited unexpectedly and was restarted ({} time(s) in 5 minutes)", vm.crashes.len());
        vm.degraded = Some(Reason::new("GuestRestarted", message));
        match self.boot(vm, t).await {
            Ok(()) => Ok((vm.observation(starting("Restarting", "the guest is booting again")), Requeue::after(STEP))),
            // Right after a crash the dead QEMU may still hold its files: the
            // reconciler tries again after its backoff, as a first boot
            // (whose failure is final), before the VM is called FAILED.
            Err(Stop::Failed(r)) => Err(Stop::Backend(BackendError::transient("restarting the guest after its QEMU exited", r.message))),
            Err(e) => Err(e),
        }
    }

    /// Boots the guest and starts watching it.
    async fn boot(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), Stop> {
        self.clone_disks(vm, t).await.map_err(Stop::Failed)?;
        let process = self.launcher.launch(vm, t).await?;
        vm.started = Some(Instant::now());
        vm.stop_deadline = None;
        vm.ready.store(false, Ordering::SeqCst);
        match SerialConsole::attach(&vm.path("serial.sock"), vm.path("console.log")).await {
            Ok(c) => {
                if matches!(vm.boot, Some(crate::clone::BootPath::Restored(_))) {
                    // A clone's guest goes on once its console is watched (see snapshot.rs).
                    c.send(b"\n");
                }
                vm.console = Some(c);
            }
            Err(e) => warn!(vm = %t.id, error = %e, "cannot attach the serial console"),
        }
        let process = Arc::new(process);
        vm.process = Some(process.clone());
        self.start_probe(vm, t);
        self.watch_exit(vm, &process);
        self.watch_events(vm);
        info!(vm = %t.id, name = %t.name, pid = process.pid(), accel = self.accel.accel.as_str(), "guest started");
        Ok(())
    }

    fn start_probe(&self, vm: &mut Vm, t: &VmTarget) {
        if let Some(p) = vm.probe.take() {
            p.abort();
        }
        let job = probe_job(vm, t);
        let (wake, id) = (self.wake.get().cloned(), t.id.clone());
        vm.probe = Some(probe::spawn(job, vm.ready.clone(), move || {
            if let Some(w) = wake {
                w.wake(ObjectKind::VirtualMachine, &id);
            }
        }));
    }

    /// Wakes the reconciler for this VM as soon as its QEMU exits, however it
    /// exits (powered off, crashed, killed), so the status follows at once.
    fn watch_exit(&self, vm: &mut Vm, p: &Arc<Process>) {
        let Some(wake) = self.wake.get().cloned() else { return };
        if let Some(w) = vm.exit_watch.take() {
            w.abort();
        }
        let (p, id) = (p.clone(), vm.file.id.clone());
        vm.exit_watch = Some(tokio::spawn(async move {
            p.exited().await;
            wake.wake(ObjectKind::VirtualMachine, &id);
        }));
    }

    /// Wakes the reconciler for this VM as soon as a write the host cannot
    /// take freezes its guest, and when the guest goes on again.
    fn watch_events(&self, vm: &mut Vm) {
        let Some(wake) = self.wake.get().cloned() else { return };
        if let Some(w) = vm.event_watch.take() {
            w.abort();
        }
        let id = vm.file.id.clone();
        let socket = vm.path(crate::io_error::SOCKET);
        vm.event_watch = Some(crate::io_error::watch(socket, vm.io_frozen.clone(), move || wake.wake(ObjectKind::VirtualMachine, &id)));
    }

    /// Asks the guest to power off (ACPI), or stops it hard once the grace period is over.
    async fn stop_step(&self, vm: &mut Vm, p: &Process, grace: std::time::Duration) {
        match vm.stop_deadline {
            None => {
                vm.stop_deadline = Some(Instant::now() + grace);
                match press_power_button(&vm.path("qmp.sock")).await {
                    Ok(()) => info!(vm = %vm.file.id, "ACPI power-down sent"),
                    Err(e) => {
                        warn!(vm = %vm.file.id, error = %e, "power-down failed; stopping hard");
                        p.kill();
                    }
                }
            }
            Some(deadline) if Instant::now() >= deadline => {
                warn!(vm = %vm.file.id, ?grace, "the guest did not power off in time; stopping hard");
                quit(&vm.path("qmp.sock"), p).await;
            }
            Some(_) => {}
        }
    }

    /// Removes everything VM `id` has: its process, directory and external IP.
    pub(crate) async fn delete_vm(&self, id: &str) -> Result<(), BackendError> {
        let handle = self.handle(id);
        let dir = self.cfg.state_dir.join(id);
        let process = match &handle {
            Some(h) => h.lock().await.process.clone(),
            None => match crate::process::read_pid(&dir.join("qemu.pid")).await {
                Some(pid) => Process::adopt(pid, id).await.map(Arc::new),
                None => None,
            },
        };
        if let Some(p) = process.filter(|p| !p.has_exited()) {
            // Its volumes outlive it: the guest powers off and QEMU flushes them first.
            shut_down(id, &dir.join("qmp.sock"), &p, self.cfg.stop_grace).await;
            if !p.has_exited() {
                return Err(BackendError::transient("stopping the guest", format!("QEMU (pid {}) survives SIGKILL", p.pid())));
            }
        }
        if let Some(h) = &handle {
            h.lock().await.stop_runtime();
        }
        self.ports.detach(id).await;
        // A swtpm whose QEMU never connected (a crash between the two starts) ends with its VM.
        crate::platform::stop_swtpm(&dir).await;
        crate::platform::stop_target_swtpm(&dir).await;
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::transient(format!("removing {}", dir.display()), e)),
        }
        self.launcher.release(id);
        self.forget(id);
        info!(vm = %id, "guest deleted");
        Ok(())
    }

    /// Powers the guest off for a restart as a real machine is: the ACPI
    /// power button, then up to the stop grace for the guest to flush its
    /// disks and power off (with `-no-reboot` QEMU then exits); only then
    /// a hard stop. Pulling the plug at once would lose what the guest had
    /// not written yet (a Debian guest's fresh SSH host keys, say).
    async fn power_off(&self, vm: &Vm, p: &Process, grace: std::time::Duration) {
        shut_down(&vm.file.id, &vm.path("qmp.sock"), p, grace).await;
    }
}

/// Shuts a guest down so that its disks keep what it wrote, as a real
/// machine is: a running guest gets the ACPI power button and up to
/// `grace` to flush its caches and power off (with `-no-reboot` QEMU then
/// exits); then QMP `quit`, which has QEMU flush every block node (qcow2
/// metadata included) before it exits; SIGKILL only if QEMU lingers after
/// that. Pulling the plug at once would lose what the guest had not
/// written yet, and a qcow2 file's unflushed mappings with it.
pub(crate) async fn shut_down(id: &str, qmp: &Path, p: &Process, grace: Duration) {
    if p.has_exited() {
        return;
    }
    // One QMP connection asks and presses, and is closed before the wait
    // (QEMU takes one monitor client at a time).
    let (running, pressed) = match Qmp::connect(qmp).await {
        Ok(mut q) => {
            let running = q.status().await.is_ok_and(|s| s == "running");
            (running, running && q.execute("system_powerdown", None).await.is_ok())
        }
        Err(_) => (false, false),
    };
    if pressed && tokio::time::timeout(grace, p.exited()).await.is_ok() {
        info!(vm = %id, "the guest powered off");
        return;
    }
    if running {
        warn!(vm = %id, ?grace, "the guest did not power off in time; stopping hard");
    }
    quit(qmp, p).await;
}

/// Stops QEMU now: `quit` over QMP (block nodes flushed), then SIGKILL if it lingers.
pub(crate) async fn quit(qmp: &Path, p: &Process) {
    if let Ok(mut q) = Qmp::connect(qmp).await {
        let _ = q.execute("quit", None).await;
    }
    if tokio::time::timeout(Duration::from_secs(5), p.exited()).await.is_err() {
        warn!(pid = p.pid(), "QEMU did not quit; killing it");
        p.kill_and_wait(Duration::from_secs(2)).await;
    }
}

/// Presses the guest's ACPI power button (QMP `system_powerdown`).
async fn press_power_button(qmp: &Path) -> Result<(), crate::qmp::QmpError> {
    Qmp::connect(qmp).await?.execute("system_powerdown", None).await.map(|_| ())
}

fn starting_stop() -> Phase {
    Phase::Stopping(Reason::new("PoweringOff", "the guest is powering off"))
}

/// What probing `vm` takes.
fn probe_job(vm: &Vm, t: &VmTarget) -> ProbeJob {
    ProbeJob {
        probe: effective_probe(&t.spec.machine),
        port: vm.file.probe_port,
        qmp: vm.path("qmp.sock"),
        console_log: vm.path("console.log"),
    }
}
