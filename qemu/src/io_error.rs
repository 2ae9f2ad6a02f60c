//! A guest frozen by a write its host could not take. QEMU stops a guest
//! whose disk write fails for want of room (virtio-blk's `werror=enospc`,
//! its default), and `query-status` then says `io-error`. The backend hears
//! of it at once through a second QMP socket kept for events (QEMU serves
//! one client per socket, and the control socket's clients come and go),
//! reports the VM DEGRADED (`PausedIOError`, as the kubevirt backend does
//! when KubeVirt pauses a guest for the same reason), and lets the guest go
//! on (QMP `cont`, which retries the writes that failed) once the file
//! system of its directory has room again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};
use vmaas_backend::BackendError;
use vmaas_model::Reason;

use crate::qmp::Qmp;
use crate::vm::Vm;

/// The QMP socket of a VM's directory kept for events.
pub(crate) const SOCKET: &str = crate::argv::EVENTS_SOCKET;

/// What `query-status` says of a guest frozen by a failed disk write.
const IO_ERROR: &str = "io-error";

/// The room the VM's file system needs before its guest is let go on: a
/// guest let go on with less would freeze again on its next writes.
pub(crate) const ROOM: u64 = 64 << 20;

/// How often a frozen guest's file system is looked at again.
pub(crate) const RECHECK: Duration = Duration::from_secs(2);

/// The reason a frozen guest's VM is DEGRADED, on both backends.
pub(crate) const REASON: &str = "PausedIOError";

/// Listens to the events of the QEMU whose event socket is `socket` until
/// it closes: a failed write that froze the guest sets `frozen`, the guest
/// going on clears it, and both call `wake`.
pub(crate) fn watch(socket: PathBuf, frozen: Arc<AtomicBool>, wake: impl Fn() + Send + 'static) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut q = match Qmp::connect(&socket).await {
            Ok(q) => q,
            Err(e) => {
                // A QEMU started by a vmaas that had no event socket yet.
                debug!(socket = %socket.display(), error = %e, "no QMP event socket: a frozen guest is seen at the next look");
                return;
            }
        };
        loop {
            match q.next_event().await {
                Ok(Some(event)) => {
                    if let Some(f) = freezes(&event) {
                        frozen.store(f, Ordering::SeqCst);
                        wake();
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    warn!(socket = %socket.display(), error = %e, "the QMP event socket broke");
                    return;
                }
            }
        }
    })
}

/// Whether QMP event `event` froze the guest (`Some(true)`: a failed
/// write whose action is to stop), let it go on (`Some(false)`), or
/// neither (`None`).
fn freezes(event: &Value) -> Option<bool> {
    match event["event"].as_str()? {
        "BLOCK_IO_ERROR" => (event["data"]["action"] == "stop").then_some(true),
        "RESUME" => Some(false),
        _ => None,
    }
}

/// Whether `vm`'s running guest is frozen by a failed write now (asked of
/// QEMU): what a backend that starts again over a running guest looks at
/// once, since the event that froze it came before it listened.
pub(crate) async fn frozen_now(vm: &Vm) -> bool {
    match Qmp::connect(&vm.path("qmp.sock")).await {
        Ok(mut q) => q.status().await.is_ok_and(|s| s == IO_ERROR),
        Err(_) => false,
    }
}

/// Why `vm`'s guest stands frozen by a failed write, if it does. One that
/// is frozen is let go on first when its file system has [`ROOM`] again,
/// and is then not frozen. Asks QEMU only after an event said it froze;
/// only the `RESUME` event clears that (clearing it here could lose a
/// freeze heard between this look and the clear).
pub(crate) async fn check(vm: &Vm) -> Result<Option<Reason>, BackendError> {
    if !vm.io_frozen.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(|e| BackendError::transient("connecting to QMP", e))?;
    let status = q.status().await.map_err(|e| BackendError::transient("reading the guest's status", e))?;
    if status != IO_ERROR {
        return Ok(None);
    }
    let free = free_bytes(&vm.dir);
    if free >= ROOM {
        q.execute("cont", None).await.map_err(|e| BackendError::transient("letting the frozen guest go on (QMP cont)", e))?;
        info!(vm = %vm.file.id, free_mib = free >> 20, "the host has room again: the guest frozen by a failed write goes on");
        return Ok(None);
    }
    let message = format!(
        "the guest is frozen: a write to its disk failed for want of room on the host ({} MiB free in {}); \
         it goes on by itself, its writes retried, once {} MiB are free",
        free >> 20,
        vm.dir.display(),
        ROOM >> 20
    );
    Ok(Some(Reason::new(REASON, message)))
}

/// The bytes an unprivileged writer may still use on `dir`'s file system
/// (0 if it cannot be read).
fn free_bytes(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir).map(|s| s.f_bavail.saturating_mul(s.f_frsize)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::freezes;

    #[test]
    fn a_write_that_stops_the_guest_freezes_it_and_a_resume_lets_it_go() {
        let stop = json!({"event": "BLOCK_IO_ERROR", "data": {"device": "", "node-name": "root", "operation": "write", "action": "stop", "nospace": true}});
        let report = json!({"event": "BLOCK_IO_ERROR", "data": {"operation": "read", "action": "report"}});
        assert_eq!(freezes(&stop), Some(true));
        assert_eq!(freezes(&report), None, "an error reported to the guest does not freeze it");
        assert_eq!(freezes(&json!({"event": "RESUME"})), Some(false));
        assert_eq!(freezes(&json!({"event": "STOP"})), None, "a pause is the user's, not a failed write");
        assert_eq!(freezes(&json!({"return": {}})), None);
    }
}
