//! Waiting for a VM to reach a state, woken by its events.

use std::time::{Duration, Instant};

use vmaas_model::{ConditionType, VirtualMachine, VmState};

use crate::{Client, Error, WaitFor, describe_status};

impl Client {
    /// Waits until VM `id` reaches `target` (STOPPED: where its placement
    /// asks; a move that fails or cannot be made is an error), woken by its events (polling
    /// every `every` without an event stream, ten times slower with one), calling
    /// `progress` on every change of its status line. Fails at once if the VM
    /// is FAILED while waiting for READY, and after `timeout` otherwise.
    pub async fn wait_vm(
        &self,
        id: &str,
        target: WaitFor,
        timeout: Duration,
        every: Duration,
        mut progress: impl FnMut(&VirtualMachine),
    ) -> Result<Option<VirtualMachine>, Error> {
        let started = Instant::now();
        let what = match target {
            WaitFor::Ready => format!("virtual machine {id} to be READY (running, with its guest answering its readiness probe)"),
            WaitFor::Stopped => format!("virtual machine {id} to be STOPPED"),
            WaitFor::Paused => format!("virtual machine {id} to be PAUSED"),
            WaitFor::Deleted => format!("virtual machine {id} to be deleted"),
        };
        let mut last_line = String::from("nothing yet");
        // Woken by the VM's events; polling stays as the fallback, slower
        // while the stream is open (and at `every` without one).
        let mut watch = self.watch_events(&format!("event.virtual_machine.id == '{id}'"), timeout).await.ok();
        loop {
            match self.get_vm(id).await {
                Ok(vm) => {
                    let line = describe_status(&vm);
                    if line != last_line {
                        progress(&vm);
                        last_line = line;
                    }
                    let st = vm.status.state;
                    match (target, st) {
                        (WaitFor::Stopped, VmState::Stopped) if let Some(reason) = not_moved(&vm) => {
                            return Err(Error::Failed { what, reason });
                        }
                        (WaitFor::Ready, VmState::Ready) | (WaitFor::Stopped, VmState::Stopped) | (WaitFor::Paused, VmState::Paused) => {
                            return Ok(Some(vm));
                        }
                        (WaitFor::Ready | WaitFor::Stopped | WaitFor::Paused, VmState::Failed) => {
                            let reason = vm
                                .status
                                .condition(ConditionType::Failed)
                                .map(|c| format!("{}: {}", c.reason.as_deref().unwrap_or("-"), c.message))
                                .unwrap_or_default();
                            return Err(Error::Failed { what, reason });
                        }
                        (WaitFor::Ready | WaitFor::Stopped | WaitFor::Paused, VmState::Deleting) => {
                            return Err(Error::Failed { what, reason: "the VM is being deleted".into() });
                        }
                        _ => {}
                    }
                }
                Err(e) if e.is_not_found() && target == WaitFor::Deleted => return Ok(None),
                Err(e) => return Err(e),
            }
            if started.elapsed() >= timeout {
                return Err(Error::Timeout { what, waited: timeout, last: last_line });
            }
            let pause = if watch.is_some() { every * 10 } else { every };
            let pause = pause.min(timeout.saturating_sub(started.elapsed())).max(Duration::from_millis(10));
            match watch.as_mut() {
                Some(w) => tokio::select! {
                    next = tokio::time::timeout(pause, w.next()) => if let Ok(None) = next {
                        watch = None;
                    },
                    () = self.stopped() => return Err(Error::Interrupted),
                },
                None => self.pause(pause).await?,
            }
        }
    }
}

/// Why a stopped VM is not where its placement asks (its move failed, or
/// cannot be made), if it is not.
fn not_moved(vm: &VirtualMachine) -> Option<String> {
    let c = vm.status.condition(ConditionType::Degraded).filter(|c| c.status == vmaas_model::ConditionStatus::True)?;
    matches!(c.reason.as_deref(), Some("NotMoved" | "MoveFailed")).then(|| format!("{}: {}", c.reason.as_deref().unwrap_or("-"), c.message))
}
