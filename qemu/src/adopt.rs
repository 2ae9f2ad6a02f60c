//! What the backend finds on the host at start, and what it keeps without
//! being asked: re-adopting running guests (recovering damaged state
//! files from the running QEMU), and quarantining VMs no stored object owns.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{info, warn};
use vmaas_backend::{BackendError, Quarantined};
use vmaas_model::ObjectKind;

use crate::Vms;
use crate::console::SerialConsole;
use crate::process::Process;
use crate::qmp::Qmp;
use crate::recover::{Found, find_qemu, rebuild};
use crate::state::VmFile;
use crate::vm::Vm;

impl Vms {
    /// Adopts every VM directory under the state directory.
    pub(crate) async fn adopt_all(&self) {
        let Ok(mut entries) = tokio::fs::read_dir(&self.cfg.state_dir).await else { return };
        while let Ok(Some(e)) = entries.next_entry().await {
            if let Some(vm) = self.adopt_dir(e.path()).await {
                let id = vm.file.id.clone();
                self.map().insert(id, Arc::new(tokio::sync::Mutex::new(vm)));
            }
        }
    }

    /// The VM in `dir`, with its running QEMU if there is one. A damaged or
    /// missing state file (beside a disk) is rebuilt from the running QEMU.
    async fn adopt_dir(&self, dir: PathBuf) -> Option<Vm> {
        let loaded = VmFile::load(&dir).await;
        let has_disk = tokio::fs::try_exists(dir.join(crate::vm::BOOT_DISK)).await.unwrap_or(false);
        if loaded.is_none() && !has_disk {
            return None;
        }
        let probe_dir = dir.clone();
        let found = tokio::task::spawn_blocking(move || find_qemu(&probe_dir)).await.ok().flatten();
        let (file, recovered) = match loaded {
            Some(Ok(f)) => (f, false),
            damaged => {
                let why = match damaged {
                    Some(Err(e)) => e.to_string(),
                    _ => "missing".to_owned(),
                };
                let file = rebuild(&dir, found.as_ref());
                warn!(dir = %dir.display(), error = %why, qemu_pid = ?found.as_ref().map(|f| f.pid), "damaged vm.json: rebuilt from the host");
                if let Err(e) = file.save(&dir).await {
                    warn!(dir = %dir.display(), error = %e, "cannot save the rebuilt vm.json");
                }
                (file, true)
            }
        };
        if let Some(ip) = file.external_ip
            && let Err(e) = self.launcher.pool().reserve(ip, &file.id)
        {
            warn!(vm = %file.id, error = %e, "external IP conflict");
        }
        let mut vm = Vm::new(dir, file);
        vm.recovered = recovered;
        if let Some(p) = self.adopt_process(&vm, found.as_ref()) {
            let status = match Qmp::connect(&vm.path("qmp.sock")).await {
                Ok(mut q) => q.status().await.unwrap_or_else(|e| e.to_string()),
                Err(e) => e.to_string(),
            };
            if status == "inmigrate" {
                // A clone the server died restoring: never a guest yet; it starts again.
                warn!(vm = %vm.file.id, pid = p.pid(), "a clone left waiting for its snapshot: stopped");
                p.kill_and_wait(std::time::Duration::from_secs(5)).await;
                return Some(vm);
            }
            if recovered && vm.file.external_ip.is_none() {
                self.recover_forwards(&mut vm).await;
            }
            self.launcher.gpus().hold(&vm.file.id, &vm.file.gpus);
            self.reattach(&mut vm, p, &status).await;
        }
        Some(vm)
    }

    /// Fills a rebuilt state file's external IP and probe port from the
    /// forwards QEMU has (a clone's are not on its command line: they were
    /// plugged in with its NIC).
    async fn recover_forwards(&self, vm: &mut Vm) {
        let Ok(mut q) = Qmp::connect(&vm.path("qmp.sock")).await else { return };
        let Ok(table) = q.execute("human-monitor-command", Some(serde_json::json!({"command-line": "info usernet"}))).await else { return };
        let fwd = crate::recover::usernet_forwards(table.as_str().unwrap_or(""));
        (vm.file.external_ip, vm.file.probe_port) = crate::recover::addresses(&fwd);
        if let Some(ip) = vm.file.external_ip {
            let _ = self.launcher.pool().reserve(ip, &vm.file.id);
        }
        if let Err(e) = vm.file.save(&vm.dir).await {
            warn!(vm = %vm.file.id, error = %e, "cannot save the rebuilt vm.json");
        }
    }

    /// Holds the QEMU `find_qemu` found (its command line names the VM's
    /// sockets, so it is not read again).
    fn adopt_process(&self, vm: &Vm, found: Option<&Found>) -> Option<Process> {
        let f = found?;
        let p = Process::hold(f.pid)?;
        if !f.by_pid_file {
            // The pid file was lost or names another process: write it again.
            let _ = crate::atomic::write_atomic(&vm.path("qemu.pid"), format!("{}\n", f.pid).as_bytes());
        }
        Some(p)
    }

    async fn reattach(&self, vm: &mut Vm, p: Process, status: &str) {
        let console = match SerialConsole::attach(&vm.path("serial.sock"), vm.path("console.log")).await {
            Ok(c) => Some(c),
            Err(e) => {
                warn!(vm = %vm.file.id, error = %e, "cannot reattach the serial console");
                None
            }
        };
        info!(vm = %vm.file.id, name = %vm.file.name, pid = p.pid(), qemu_status = %status, "re-adopted a running VM");
        vm.adopt(p, console);
        vm.paused = crate::pause::is_paused(status);
    }

    /// Quarantines the VMs on the host that no stored object owns and the
    /// reconciler never asked for: they are kept (a guest keeps running)
    /// and reported, never deleted here.
    pub(crate) async fn quarantine_unknown(&self, known: &[String]) -> Result<(), BackendError> {
        let known: HashSet<&str> = known.iter().map(String::as_str).collect();
        let handles: Vec<_> = self.map().iter().filter(|(id, _)| !known.contains(id.as_str())).map(|(_, h)| h.clone()).collect();
        let mut found = BTreeMap::new();
        for h in handles {
            let vm = h.lock().await;
            if vm.claimed {
                continue;
            }
            found.insert(vm.file.id.clone(), quarantined(&vm));
        }
        let mut q = self.quarantine_lock();
        for (id, item) in &found {
            if !q.contains_key(id) {
                warn!(vm = %id, name = ?item.name, tenant = ?item.tenant, running = item.running, path = %item.path,
                    "quarantined a VM the store does not know: kept, not deleted (see docs/operations.md)");
            }
        }
        *q = found;
        Ok(())
    }
}

fn quarantined(vm: &Vm) -> Quarantined {
    let known = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Quarantined {
        kind: ObjectKind::VirtualMachine,
        id: vm.file.id.clone(),
        name: known(&vm.file.name),
        tenant: known(&vm.file.tenant),
        running: vm.is_running(),
        path: vm.dir.display().to_string(),
    }
}
