//! Pausing a running guest: QMP `stop` freezes its vCPUs (its memory,
//! disks, devices and QEMU stay as they are) and `cont` lets it go on where
//! it was. A VM asked to be paused that is not running is booted first
//! and paused once it runs; one asked to run, or to stop, is let go on
//! first (a frozen guest cannot answer the power button).

use tracing::info;
use vmaas_backend::BackendError;
use vmaas_model::{Observation, Phase};

use crate::qmp::Qmp;
use crate::vm::Vm;

/// What QMP's `query-status` says of a frozen guest.
const PAUSED: &str = "paused";

/// Freezes `vm`'s running guest, if it is not frozen yet; its observation
/// is PAUSED.
pub(crate) async fn pause(vm: &mut Vm) -> Result<Observation, BackendError> {
    let (mut q, status) = status(vm).await?;
    if status != PAUSED {
        q.execute("stop", None).await.map_err(|e| BackendError::transient("pausing the guest (QMP stop)", e))?;
        info!(vm = %vm.file.id, "guest paused");
    }
    vm.paused = true;
    Ok(vm.observation(Phase::Paused))
}

/// Lets `vm`'s guest go on, if this backend froze it.
pub(crate) async fn resume(vm: &mut Vm) -> Result<(), BackendError> {
    if !vm.paused || vm.running().is_none() {
        vm.paused = false;
        return Ok(());
    }
    let (mut q, status) = status(vm).await?;
    if status == PAUSED {
        q.execute("cont", None).await.map_err(|e| BackendError::transient("resuming the guest (QMP cont)", e))?;
        info!(vm = %vm.file.id, "guest resumed");
    }
    vm.paused = false;
    Ok(())
}

/// Whether QEMU's `status` (as adoption reads it) is a frozen guest.
pub(crate) fn is_paused(status: &str) -> bool {
    status == PAUSED
}

/// A QMP connection to `vm`'s QEMU, and what `query-status` says of its guest.
async fn status(vm: &Vm) -> Result<(Qmp, String), BackendError> {
    let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(|e| BackendError::transient("connecting to QMP", e))?;
    let status = q.status().await.map_err(|e| BackendError::transient("reading the guest's status", e))?;
    Ok((q, status))
}
