//! Live migration on one host: the running guest moves to a new QEMU
//! process (the configured binary: how a VM moves to an upgraded QEMU)
//! without the guest noticing. The new QEMU is the old one's command line
//! with its own control, serial and pid files (`*.next`), no host forwards
//! (the old QEMU holds those ports) and `-incoming defer`; QMP `migrate`
//! sends the guest's state over a unix socket in the VM's directory (the
//! disks are the same files: shared storage); once it completes, the old
//! QEMU is stopped, the new one's files take the usual names (a bound unix
//! socket keeps working under a new name), and the console, forwards,
//! probe and exit watch follow it. The switch port of each subnet NIC
//! takes the new QEMU's connection when it makes it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tracing::info;
use vmaas_backend::VmTarget;

use crate::Vms;
use crate::argv::{Forward, QemuArgs};
use crate::console::SerialConsole;
use crate::lifecycle::Vm;
use crate::process::{Process, read_pid};
use crate::qmp::Qmp;

/// The files a migration target has before it takes the usual names.
const NEXT: [&str; 3] = ["qmp.sock", "serial.sock", "qemu.pid"];
/// How long the state may take to move.
const LIMIT: Duration = Duration::from_secs(300);

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
/// forwards, the devices `plugged` into the source since it started (a
/// clone's NICs and seed), and waiting for its state.
pub(crate) fn target_args(args: &[String], qemu: &Path, dir: &Path, plugged: &[String]) -> Vec<String> {
    let mut out = vec![qemu.display().to_string()];
    let mut rest = args.iter().skip(1);
    while let Some(a) = rest.next() {
        if a == "-incoming" {
            // A clone's own `-incoming defer`: the target has its own.
            rest.next();
            continue;
        }
        let mut a = a.clone();
        for f in NEXT {
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
    out.extend(plugged.iter().cloned());
    out.extend(["-incoming".to_owned(), "defer".to_owned()]);
    out
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// Waits until the source reports the migration over; what it measured.
async fn until_done(src: &mut Qmp) -> Result<Migrated, String> {
    let start = Instant::now();
    loop {
        let r = src.execute("query-migrate", None).await.map_err(|e| err("asking how the migration goes", e))?;
        match r["status"].as_str().unwrap_or("") {
            "completed" => {
                return Ok(Migrated {
                    downtime_ms: r["downtime"].as_u64().unwrap_or(0),
                    total_ms: r["total-time"].as_u64().unwrap_or(start.elapsed().as_millis() as u64),
                });
            }
            "failed" | "cancelled" => return Err(format!("QEMU: {}", r["error-desc"].as_str().unwrap_or("the migration failed"))),
            _ if start.elapsed() > LIMIT => {
                let _ = src.execute("migrate_cancel", None).await;
                return Err(format!("the guest's state did not move within {LIMIT:?}; the migration was cancelled"));
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

impl Vms {
    /// Moves the running guest of `vm` to a new QEMU; on any failure the
    /// old QEMU keeps running it and the new one is stopped.
    pub(crate) async fn migrate(&self, vm: &mut Vm, t: &VmTarget) -> Result<Migrated, String> {
        let source = vm.process.clone().filter(|p| !p.has_exited()).ok_or("the guest is not running")?;
        let pid = source.pid();
        let args = tokio::task::spawn_blocking(move || crate::recover::cmdline(pid))
            .await
            .ok()
            .flatten()
            .ok_or("cannot read QEMU's command line")?;
        // Whatever an earlier, interrupted migration left.
        for f in NEXT.iter().map(|f| format!("{f}.next")).chain(["migrate.sock".to_owned()]) {
            let _ = tokio::fs::remove_file(vm.path(&f)).await;
        }
        let target = target_args(&args, &self.cfg.qemu, &vm.dir, &vm.file.plugged);
        let out = tokio::process::Command::new(&target[0]).args(&target[1..]).stdin(std::process::Stdio::null()).output().await;
        let out = out.map_err(|e| err("starting the new QEMU", e))?;
        if !out.status.success() {
            return Err(format!("the new QEMU refused to start: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let new_pid = read_pid(&vm.path("qemu.pid.next")).await.ok_or("the new QEMU wrote no pid file")?;
        let new = Process::adopt(new_pid, &t.id).await.ok_or("the new QEMU exited at once")?;
        match self.move_state(vm).await {
            Ok(m) => {
                source.kill_and_wait(Duration::from_secs(5)).await;
                self.take_over(vm, t, new).await?;
                Ok(m)
            }
            Err(e) => {
                new.kill_and_wait(Duration::from_secs(5)).await;
                Err(e)
            }
        }
    }

    /// Sends the guest's state from the running QEMU to the new one.
    async fn move_state(&self, vm: &Vm) -> Result<Migrated, String> {
        let uri = format!("unix:{}", vm.path("migrate.sock").display());
        let mut target = Qmp::connect(&vm.path("qmp.sock.next")).await.map_err(|e| err("connecting to the new QEMU", e))?;
        target.execute("migrate-incoming", Some(json!({ "uri": uri }))).await.map_err(|e| err("readying the new QEMU", e))?;
        let mut src = Qmp::connect(&vm.path("qmp.sock")).await.map_err(|e| err("connecting to the running QEMU", e))?;
        src.execute("migrate", Some(json!({ "uri": uri }))).await.map_err(|e| err("starting the migration", e))?;
        let m = until_done(&mut src).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while target.status().await.map_err(|e| err("asking the new QEMU", e))? != "running" {
            if Instant::now() > deadline {
                return Err("the new QEMU did not resume the guest".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(m)
    }

    /// Makes the new QEMU the VM's: its files take the usual names, and
    /// the console, forwards, probe and exit watch follow it.
    async fn take_over(&self, vm: &mut Vm, t: &VmTarget, new: Process) -> Result<(), String> {
        vm.stop_runtime();
        for f in NEXT {
            tokio::fs::rename(vm.path(&format!("{f}.next")), vm.path(f)).await.map_err(|e| err(&format!("renaming {f}.next"), e))?;
        }
        let _ = tokio::fs::remove_file(vm.path("migrate.sock")).await;
        let console = SerialConsole::attach(&vm.path("serial.sock"), vm.path("console.log")).await.ok();
        let pid = new.pid();
        // The guest was ready and still is: the next `ensure` probes and
        // watches the new QEMU (as after a server restart).
        vm.file.ready_pid = Some(pid);
        vm.file.save(&vm.dir).await.map_err(|e| err("saving vm.json", e))?;
        vm.adopt(new, console);
        crate::launch::sentinel(&vm.dir, pid, &t.id).await;
        self.forward_again(vm, t).await
    }

    /// Gives the new QEMU the forwards the old one had: its own (exposed
    /// ports, the probe port) and the extra ones applied since.
    async fn forward_again(&self, vm: &Vm, t: &VmTarget) -> Result<(), String> {
        let (Some(external), Some(nic)) = (vm.file.external_ip, t.spec.machine.nics.first()) else { return Ok(()) };
        let probe = crate::probe::effective_probe(&t.spec.machine);
        let own = QemuArgs::forwards(&t.spec.machine.exposed_ports, external, vm.file.probe_port.zip(probe.map(|p| p.check.port())));
        let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(|e| err("connecting to the new QEMU", e))?;
        for f in own.iter().chain(&vm.file.forwards).collect::<Vec<&Forward>>() {
            let command = format!("hostfwd_add nic-{} {}", nic.name, f.rule());
            let out = q.execute("human-monitor-command", Some(json!({ "command-line": command }))).await.map_err(|e| err(&command, e))?;
            let text = out.as_str().unwrap_or_default().trim();
            if !text.is_empty() {
                return Err(format!("{command}: {text}"));
            }
        }
        info!(vm = %t.id, forwards = own.len() + vm.file.forwards.len(), "forwards moved to the new QEMU");
        Ok(())
    }
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
    }
}
