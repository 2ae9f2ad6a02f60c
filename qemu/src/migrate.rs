//! Live migration on one host: the running guest moves to a new QEMU
//! process (the configured binary: how a VM moves to an upgraded QEMU)
//! without the guest noticing. The new QEMU is the old one's command line
//! with its own control, serial and pid files (`*.next`), no host forwards
//! (the old QEMU holds those ports) and `-incoming defer`; QMP `migrate`
//! sends the guest's state over a unix socket in the VM's directory (the
//! disks are the same files: shared storage), planning to pause the guest
//! at most [`DOWNTIME_LIMIT`] for the last copy (doubled every [`ROUND`]
//! the state does not converge, up to [`DOWNTIME_CAP`]). QEMU waits before that
//! switchover (`pause-before-switchover`) while the old QEMU's host
//! forwards close, so that a client is refused at once rather than left
//! on a guest that no longer runs there (they open again if the migration
//! fails). Once it completes (looked at every 5 ms), the old QEMU is
//! killed, the new one gets the host forwards at once (what clients see
//! move), then its files take the usual names (a bound unix socket keeps
//! working under a new name), and the console, probe and exit watch
//! follow it. The switch port of each subnet NIC
//! takes the new QEMU's connection when it makes it. The new QEMU has the
//! volumes the old one has now (plugged or unplugged since it started), at
//! the PCI slots they have there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tracing::info;
use vmaas_backend::{BackendError, VmTarget};

use crate::argv::{Forward, QemuArgs, VolumeArg};
use crate::console::SerialConsole;
use crate::hotplug::Plugs;
use crate::platform::{PlatformPaths, TPM_DIR, TPM_PID, TPM_SOCKET, other_tpm_dir};
use crate::process::{Process, read_pid};
use crate::qmp::{Qmp, Unfinished, migration_at};
use crate::vm::Vm;

/// The files a migration target has before it takes the usual names.
const NEXT: [&str; 6] = ["qmp.sock", crate::io_error::SOCKET, "serial.sock", crate::agent::SOCKET, crate::display::SOCKET, "qemu.pid"];
/// How long the state may take to move.
const LIMIT: Duration = Duration::from_secs(300);

/// The longest pause QEMU may plan for its last copy at first (its
/// default is 300 ms).
const DOWNTIME_LIMIT: Duration = Duration::from_millis(50);

/// How long the state may take to converge at one downtime limit before
/// the limit doubles (a busy guest on a loaded host dirties memory faster
/// than a 50 ms pause can copy).
const ROUND: Duration = Duration::from_secs(10);

/// The longest pause a migration that does not converge is allowed.
const DOWNTIME_CAP: Duration = Duration::from_secs(2);

/// How often the migration's end and the new QEMU's resume are looked at.
const POLL: Duration = Duration::from_millis(5);

/// What a completed migration measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// How long the guest was paused, as QEMU measured it, in ms.
    pub downtime_ms: u64,
    /// How long the whole migration took, in ms.
    pub total_ms: u64,
}

/// The target's command line: the source's (`args`, whose first word is
/// the binary) run by `qemu`, with `dir`'s files renamed `*.next`, no host
/// forwards, none of its volumes, then `extra` (the devices plugged into
/// a clone since it started and the volumes the source has now), and
/// waiting for its state.
pub(crate) fn target_args(args: &[String], qemu: &Path, dir: &Path, extra: &[String]) -> Vec<String> {
    let tpm = has_tpm(args, dir);
    let mut out = vec![qemu.display().to_string()];
    let mut rest = args.iter().skip(1).peekable();
    while let Some(a) = rest.next() {
        if a == "-incoming" {
            // A clone's own `-incoming defer`: the target has its own.
            rest.next();
            continue;
        }
        if (a == "-blockdev" || a == "-device") && rest.peek().is_some_and(|v| is_volume(v)) {
            rest.next();
            continue;
        }
        let mut a = a.clone();
        for f in NEXT.into_iter().chain(tpm.then_some(TPM_SOCKET)) {
            let p = dir.join(f).display().to_string();
            // Whole paths only: `qmp.sock` is also a prefix of `qmp.sock.next`.
            a = a
                .split(',')
                .map(|part| if part.ends_with(&p) { format!("{part}.next") } else { part.to_owned() })
                .collect::<Vec<_>>()
                .join(",");
        }
        if a.starts_with("user,") {
            a = a.split(',').filter(|p| !p.starts_with("hostfwd=")).collect::<Vec<_>>().join(",");
        }
        out.push(a);
    }
    out.extend(extra.iter().cloned());
    out.extend(["-incoming".to_owned(), "defer".to_owned()]);
    out
}

/// Whether the command line `args` of VM `dir`'s QEMU has a TPM (a
/// swtpm's control socket): its target needs a swtpm of its own.
fn has_tpm(args: &[String], dir: &Path) -> bool {
    let sock = format!("path={}", dir.join(TPM_SOCKET).display());
    args.iter().any(|a| a.split(',').any(|part| part == sock))
}

/// Whether a `-blockdev` or `-device` value is a volume's.
fn is_volume(value: &str) -> bool {
    value.contains(",id=vol-") || value.contains("\"node-name\":\"vn-")
}

/// `volumes` as QEMU arguments, each device at the slot `slots` (QMP
/// `query-pci` of the source) says it has.
fn volume_args(volumes: &[VolumeArg], slots: &HashMap<String, u64>) -> Result<Vec<String>, MigrateError> {
    let mut out = Vec::new();
    for v in volumes {
        let slot = slots.get(&v.device()).ok_or_else(|| MigrateError::NotOnBus(v.serial.clone()))?;
        out.extend(["-blockdev".to_owned(), v.blockdev().to_string(), "-device".to_owned(), format!("{},addr={slot:#x}", v.device_arg())]);
    }
    Ok(out)
}

/// The slot of each device with an id on the first PCI bus, from QMP
/// `query-pci`.
fn pci_slots(answer: &Value) -> HashMap<String, u64> {
    let buses = answer.as_array().into_iter().flatten().take(1);
    let devices = buses.flat_map(|b| b["devices"].as_array().into_iter().flatten());
    devices.filter_map(|d| Some((d["qdev_id"].as_str().filter(|id| !id.is_empty())?.to_owned(), d["slot"].as_u64()?))).collect()
}

/// Why a live migration failed (the guest stays where it was).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// There is no running guest to move.
    #[error("the guest is not running")]
    NotRunning,
    /// The running QEMU's command line cannot be read.
    #[error("cannot read QEMU's command line")]
    NoCommandLine,
    /// A volume the guest has is not where QEMU reports its devices.
    #[error("volume {0} is not on the running QEMU's PCI bus")]
    NotOnBus(String),
    /// The new QEMU could not be run.
    #[error("starting the new QEMU: {0}")]
    Start(#[source] std::io::Error),
    /// The new QEMU refused to start, saying this.
    #[error("the new QEMU refused to start: {0}")]
    Refused(String),
    /// The new QEMU wrote no pid file.
    #[error("the new QEMU wrote no pid file")]
    NoPidFile,
    /// The new QEMU exited at once.
    #[error("the new QEMU exited at once")]
    ExitedAtOnce,
    /// A QMP command failed.
    #[error("{context}: {source}")]
    Qmp {
        /// What was being done.
        context: String,
        /// Why.
        source: crate::qmp::QmpError,
    },
    /// QEMU said the migration failed.
    #[error("QEMU: {0}")]
    Failed(String),
    /// QEMU could not be asked how the migration goes.
    #[error("asking how the migration goes: {0}")]
    Unasked(String),
    /// The state did not move in time; the migration was cancelled.
    #[error("the guest's state did not move within {:?}; the migration was cancelled", LIMIT)]
    TimedOut,
    /// The new QEMU did not resume the guest.
    #[error("the new QEMU did not resume the guest")]
    NotResumed,
    /// The new QEMU's files could not take the usual names.
    #[error("renaming {file}.next: {source}")]
    Rename {
        /// The file.
        file: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The new QEMU's swtpm did not start.
    #[error("the new QEMU's TPM: {0}")]
    Tpm(#[source] crate::platform::PlatformError),
    /// The VM's state file could not be written.
    #[error("saving vm.json: {0}")]
    Save(#[source] BackendError),
    /// A forward could not be added to the new QEMU.
    #[error("{command}: {said}")]
    Forward {
        /// The monitor command.
        command: String,
        /// What QEMU said.
        said: String,
    },
}

/// A QMP error `e` while doing `what`.
fn qmp(what: impl Into<String>) -> impl FnOnce(crate::qmp::QmpError) -> MigrateError {
    move |source| MigrateError::Qmp { context: what.into(), source }
}

/// Waits until the source's migration is at `status`; its last answer. One
/// that outlives [`LIMIT`] is cancelled.
async fn until_status(src: &mut Qmp, status: &str) -> Result<Value, MigrateError> {
    let r = migration_at(src, status, LIMIT, POLL).await;
    finished(src, r).await
}

/// Waits until the source pauses before the switchover, doubling the
/// downtime limit after each [`ROUND`] without getting there (up to
/// [`DOWNTIME_CAP`]); one that outlives [`LIMIT`] is cancelled.
async fn until_converged(src: &mut Qmp, vm: &str) -> Result<Value, MigrateError> {
    let start = Instant::now();
    let mut downtime = DOWNTIME_LIMIT;
    loop {
        let left = LIMIT.saturating_sub(start.elapsed());
        let round = if downtime < DOWNTIME_CAP { ROUND.min(left) } else { left };
        match migration_at(src, "pre-switchover", round, POLL).await {
            Err(Unfinished::TimedOut) if !left.is_zero() && downtime < DOWNTIME_CAP => {
                downtime = (downtime * 2).min(DOWNTIME_CAP);
                let limit = json!({ "downtime-limit": downtime.as_millis() as u64 });
                src.execute("migrate-set-parameters", Some(limit)).await.map_err(qmp("raising the migration's downtime limit"))?;
                info!(
                    vm,
                    downtime_limit_ms = downtime.as_millis() as u64,
                    "the guest's state is not converging: a longer last pause is allowed"
                );
            }
            done => return finished(src, done).await,
        }
    }
}

/// What [`migration_at`]'s answer `r` means; a migration that timed out is cancelled.
async fn finished(src: &mut Qmp, r: Result<Value, Unfinished>) -> Result<Value, MigrateError> {
    match r {
        Ok(r) => Ok(r),
        Err(Unfinished::Failed(why)) => Err(MigrateError::Failed(why)),
        Err(Unfinished::Unasked(e)) => Err(MigrateError::Unasked(e)),
        Err(Unfinished::TimedOut) => {
            let _ = src.execute("migrate_cancel", None).await;
            Err(MigrateError::TimedOut)
        }
    }
}

/// Waits until the source reports the migration over; what it measured.
async fn until_done(src: &mut Qmp) -> Result<Migrated, MigrateError> {
    let start = Instant::now();
    let r = until_status(src, "completed").await?;
    Ok(Migrated {
        downtime_ms: r["downtime"].as_u64().unwrap_or(0),
        total_ms: r["total-time"].as_u64().unwrap_or(start.elapsed().as_millis() as u64),
    })
}

/// Live migrations: what a target QEMU is started from.
pub(crate) struct Migrations {
    /// The binary the target runs.
    qemu: PathBuf,
    /// swtpm, for a target with a TPM.
    platform: PlatformPaths,
    /// The volumes' files, which the target opens too.
    plugs: Plugs,
}

impl Migrations {
    /// Targets run by `qemu`, with `platform`'s swtpm, volumes as `plugs` has them.
    pub(crate) fn new(qemu: PathBuf, platform: PlatformPaths, plugs: Plugs) -> Self {
        Self { qemu, platform, plugs }
    }

    /// Moves the running guest of `vm` to a new QEMU; on any failure the
    /// old QEMU keeps running it and the new one is stopped.
    pub(crate) async fn migrate(&self, vm: &mut Vm, t: &VmTarget) -> Result<Migrated, MigrateError> {
        let source = vm.process.clone().filter(|p| !p.has_exited()).ok_or(MigrateError::NotRunning)?;
        let pid = source.pid();
        let args =
            tokio::task::spawn_blocking(move || crate::recover::cmdline(pid)).await.ok().flatten().ok_or(MigrateError::NoCommandLine)?;
        // Whatever an earlier, interrupted migration left.
        for f in NEXT.iter().map(|f| format!("{f}.next")).chain(["migrate.sock".to_owned()]) {
            let _ = tokio::fs::remove_file(vm.path(&f)).await;
        }
        // The new QEMU's swtpm writes the other TPM state directory.
        let tpm = has_tpm(&args, &vm.dir).then(|| other_tpm_dir(vm.file.tpm_state.as_deref().unwrap_or(TPM_DIR)));
        if let Some(next) = tpm {
            self.platform.start_target_swtpm(&vm.dir, next).await.map_err(MigrateError::Tpm)?;
        }
        let new = match self.start_target(vm, t, &args).await {
            Ok(p) => p,
            Err(e) => {
                crate::platform::stop_target_swtpm(&vm.dir).await;
                return Err(e);
            }
        };
        match self.move_state(vm, t).await {
            Ok(m) => {
                // The new QEMU runs the guest: the old one goes at once, and
                // its host ports (free once it is gone) move before the rest.
                source.kill_and_wait(Duration::from_secs(5)).await;
                let forwarded = self.forward_again(vm, t, &vm.path("qmp.sock.next")).await;
                self.take_over(vm, t, new, tpm).await?;
                forwarded?;
                Ok(m)
            }
            Err(e) => {
                new.kill_and_wait(Duration::from_secs(5)).await;
                Err(e)
            }
        }
    }

    /// Starts the new QEMU, waiting for the guest's state, from the
    /// running one's command line `args`.
    async fn start_target(&self, vm: &Vm, t: &VmTarget, args: &[String]) -> Result<Process, MigrateError> {
        let extra = [vm.file.plugged.clone(), self.volumes_now(vm).await?].concat();
        let target = target_args(args, &self.qemu, &vm.dir, &extra);
        let out = tokio::process::Command::new(&target[0]).args(&target[1..]).stdin(std::process::Stdio::null()).output().await;
        let out = out.map_err(MigrateError::Start)?;
        if !out.status.success() {
            return Err(MigrateError::Refused(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
        }
        let new_pid = read_pid(&vm.path("qemu.pid.next")).await.ok_or(MigrateError::NoPidFile)?;
        Process::adopt(new_pid, &t.id).await.ok_or(MigrateError::ExitedAtOnce)
    }

    /// The volumes the running QEMU has now, as the target's arguments.
    async fn volumes_now(&self, vm: &Vm) -> Result<Vec<String>, MigrateError> {
        if vm.file.volumes.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(qmp("connecting to the running QEMU"))?;
        let pci = q.execute("query-pci", None).await.map_err(qmp("asking the running QEMU for its PCI devices"))?;
        let volumes: Vec<VolumeArg> = vm.file.volumes.iter().map(|v| self.plugs.volume_arg(&v.volume, &v.serial)).collect();
        volume_args(&volumes, &pci_slots(&pci))
    }

    /// Sends the guest's state from the running QEMU to the new one. QEMU
    /// pauses before the switchover: the old QEMU's host forwards close
    /// then (a client is refused at once, not left waiting on a guest that
    /// no longer runs there), and open again should the migration fail.
    async fn move_state(&self, vm: &Vm, t: &VmTarget) -> Result<Migrated, MigrateError> {
        let uri = format!("unix:{}", vm.path("migrate.sock").display());
        let mut target = Qmp::connect(&vm.path("qmp.sock.next")).await.map_err(qmp("connecting to the new QEMU"))?;
        target.execute("migrate-incoming", Some(json!({ "uri": uri }))).await.map_err(qmp("readying the new QEMU"))?;
        let mut src = Qmp::connect(&vm.path("qmp.sock")).await.map_err(qmp("connecting to the running QEMU"))?;
        let limit = json!({ "downtime-limit": DOWNTIME_LIMIT.as_millis() as u64 });
        src.execute("migrate-set-parameters", Some(limit)).await.map_err(qmp("setting the migration's downtime limit"))?;
        let pause = json!({"capabilities": [{"capability": "pause-before-switchover", "state": true}]});
        src.execute("migrate-set-capabilities", Some(pause)).await.map_err(qmp("asking for a pause before the switchover"))?;
        src.execute("migrate", Some(json!({ "uri": uri }))).await.map_err(qmp("starting the migration"))?;
        until_converged(&mut src, &t.id).await?;
        let (nic, list) = forwards_of(vm, t).unwrap_or_default();
        let moved = match hostfwd(&mut src, "hostfwd_remove", &nic, &list, Forward::host_side).await {
            Ok(()) => self.switch_over(&mut src, &mut target).await,
            Err(e) => {
                let _ = src.execute("migrate_cancel", None).await;
                Err(e)
            }
        };
        if moved.is_err() {
            let _ = hostfwd(&mut src, "hostfwd_add", &nic, &list, Forward::rule).await;
        }
        moved
    }

    /// Lets the paused migration finish; once the new QEMU runs the guest.
    async fn switch_over(&self, src: &mut Qmp, target: &mut Qmp) -> Result<Migrated, MigrateError> {
        let go = json!({"state": "pre-switchover"});
        src.execute("migrate-continue", Some(go)).await.map_err(qmp("continuing to the switchover"))?;
        let m = until_done(src).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while target.status().await.map_err(qmp("asking the new QEMU"))? != "running" {
            if Instant::now() > deadline {
                return Err(MigrateError::NotResumed);
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(m)
    }

    /// Makes the new QEMU the VM's: its files take the usual names, and
    /// the console, forwards, probe and exit watch follow it.
    async fn take_over(&self, vm: &mut Vm, t: &VmTarget, new: Process, tpm: Option<&str>) -> Result<(), MigrateError> {
        vm.stop_runtime();
        if tpm.is_some() {
            // The old QEMU's swtpm, which ends with it.
            crate::platform::stop_swtpm(&vm.dir).await;
        }
        let tpm_files = [TPM_SOCKET, TPM_PID].into_iter().filter(|_| tpm.is_some());
        for f in NEXT.into_iter().chain(tpm_files) {
            match tokio::fs::rename(vm.path(&format!("{f}.next")), vm.path(f)).await {
                Ok(()) => {}
                // A QEMU started before the event socket existed has none,
                // and neither has the target its command line gave.
                Err(e) if f == crate::io_error::SOCKET && e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(MigrateError::Rename { file: f, source: e }),
            }
        }
        let _ = tokio::fs::remove_file(vm.path("migrate.sock")).await;
        let console = SerialConsole::attach(&vm.path("serial.sock"), vm.path("console.log")).await.ok();
        let pid = new.pid();
        // The guest was ready and still is: the next `ensure` probes and
        // watches the new QEMU (as after a server restart).
        vm.file.ready_pid = Some(pid);
        let old_tpm = tpm.map(|next| vm.file.tpm_state.replace(next.to_owned()));
        vm.file.save(&vm.dir).await.map_err(MigrateError::Save)?;
        if let Some(old) = old_tpm {
            let _ = tokio::fs::remove_dir_all(vm.path(old.as_deref().unwrap_or(TPM_DIR))).await;
        }
        vm.adopt(new, console);
        crate::launch::sentinel(&vm.dir, pid, &t.id).await;
        Ok(())
    }

    /// Gives the new QEMU (its QMP socket `qmp_socket`) the forwards the
    /// old one had.
    async fn forward_again(&self, vm: &Vm, t: &VmTarget, qmp_socket: &Path) -> Result<(), MigrateError> {
        let Some((nic, list)) = forwards_of(vm, t).filter(|(_, l)| !l.is_empty()) else { return Ok(()) };
        let mut q = Qmp::connect(qmp_socket).await.map_err(qmp("connecting to the new QEMU"))?;
        hostfwd(&mut q, "hostfwd_add", &nic, &list, Forward::rule).await?;
        info!(vm = %t.id, forwards = list.len(), "forwards moved to the new QEMU");
        Ok(())
    }
}

/// The host forwards of `vm`'s QEMU and the NIC (netdev) they are on: its
/// own (exposed ports, the probe port) and the extra ones applied since.
fn forwards_of(vm: &Vm, t: &VmTarget) -> Option<(String, Vec<Forward>)> {
    let (external, nic) = (vm.file.external_ip?, t.spec.machine.nics.first()?);
    let probe = crate::probe::effective_probe(&t.spec.machine);
    let mut list = QemuArgs::forwards(&t.spec.machine.exposed_ports, external, vm.file.probe_port.zip(probe.map(|p| p.check.port())));
    if crate::gateway::through_subnet(t) {
        list.retain(crate::gateway::stays_in_qemu);
    }
    list.extend(vm.file.forwards.iter().cloned());
    Some((format!("nic-{}", nic.name), list))
}

/// Runs `verb` (`hostfwd_add` or `hostfwd_remove`) for each forward of
/// `list` on netdev `nic`, each written by `arg`.
async fn hostfwd(q: &mut Qmp, verb: &str, nic: &str, list: &[Forward], arg: fn(&Forward) -> String) -> Result<(), MigrateError> {
    for f in list {
        let command = format!("{verb} {nic} {}", arg(f));
        let out = q.execute("human-monitor-command", Some(json!({ "command-line": command }))).await.map_err(qmp(command.clone()))?;
        // hostfwd_add says nothing when it works; hostfwd_remove says so.
        let text = out.as_str().unwrap_or_default().trim();
        if !text.is_empty() && !text.ends_with(" removed") {
            return Err(MigrateError::Forward { command, said: text.to_owned() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_has_its_own_files_no_forwards_and_waits() {
        let dir = Path::new("/d/vm1");
        let args: Vec<String> = [
            "/usr/bin/qemu-system-x86_64",
            "-netdev",
            "user,id=nic-default,net=10.0.2.0/24,restrict=on,hostfwd=tcp:127.42.0.1:80-:80,hostfwd=tcp:127.0.0.1:4000-:80",
            "-chardev",
            "socket,id=serial0,path=/d/vm1/serial.sock,server=on,wait=off",
            "-qmp",
            "unix:/d/vm1/qmp.sock,server=on,wait=off",
            "-daemonize",
            "-pidfile",
            "/d/vm1/qemu.pid",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t = target_args(&args, Path::new("/opt/qemu-new"), dir, &[]);
        assert_eq!(t[0], "/opt/qemu-new", "the configured binary");
        assert_eq!(t[2], "user,id=nic-default,net=10.0.2.0/24,restrict=on");
        assert_eq!(t[4], "socket,id=serial0,path=/d/vm1/serial.sock.next,server=on,wait=off");
        assert_eq!(t[6], "unix:/d/vm1/qmp.sock.next,server=on,wait=off");
        assert_eq!(t[9], "/d/vm1/qemu.pid.next");
        assert_eq!(&t[10..], ["-incoming", "defer"]);

        // A clone: its own `-incoming` goes, what was plugged into it comes.
        let clone: Vec<String> = args.iter().cloned().chain(["-incoming".to_owned(), "defer".to_owned()]).collect();
        let plugged = ["-device".to_owned(), "virtio-blk-pci,drive=cidata,id=dev-cidata,addr=0x1e".to_owned()];
        let t = target_args(&clone, Path::new("/opt/qemu-new"), dir, &plugged);
        assert_eq!(&t[10..], ["-device", "virtio-blk-pci,drive=cidata,id=dev-cidata,addr=0x1e", "-incoming", "defer"]);

        // A TPM: the target's is a swtpm of its own, on the same state.
        let tpm: Vec<String> =
            args.iter().cloned().chain(["-chardev".to_owned(), "socket,id=chrtpm,path=/d/vm1/swtpm.sock".to_owned()]).collect();
        assert!(has_tpm(&tpm, dir) && !has_tpm(&args, dir));
        let t = target_args(&tpm, Path::new("/opt/qemu-new"), dir, &[]);
        assert_eq!(t[11], "socket,id=chrtpm,path=/d/vm1/swtpm.sock.next");
    }

    #[test]
    fn the_target_has_the_volumes_the_source_has_now_at_their_slots() {
        let old = VolumeArg { serial: "0b3c5e0e12344abc9def".into(), file: "/d/volumes/old.qcow2".into() };
        let new = VolumeArg { serial: "77aa5e0e12344abc9def".into(), file: "/d/volumes/new.qcow2".into() };
        let args: Vec<String> =
            ["/usr/bin/qemu-system-x86_64", "-blockdev", &old.blockdev().to_string(), "-device", &old.device_arg(), "-m", "256M"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let pci = json!([{"bus": 0, "devices": [
            {"slot": 3, "qdev_id": "dev-disk-root"},
            {"slot": 6, "qdev_id": "vol-77aa5e0e12344abc9def"},
            {"slot": 2, "qdev_id": ""},
        ]}]);
        let slots = pci_slots(&pci);
        assert_eq!(slots.get("vol-77aa5e0e12344abc9def"), Some(&6));
        assert_eq!(slots.len(), 2, "devices without an id are not named");
        let extra = volume_args(std::slice::from_ref(&new), &slots).unwrap();
        let t = target_args(&args, Path::new("/q"), Path::new("/d/vm1"), &extra);
        assert_eq!(t[1..3], ["-m", "256M"], "the volume unplugged since the start is gone: {t:?}");
        assert_eq!(t[4], new.blockdev().to_string());
        assert_eq!(t[6], "virtio-blk-pci,drive=vn-77aa5e0e12344abc9def,id=vol-77aa5e0e12344abc9def,serial=77aa5e0e12344abc9def,addr=0x6");
        assert!(volume_args(&[old], &slots).unwrap_err().to_string().contains("0b3c5e0e12344abc9def"), "a volume the source lacks");
    }
}
