//! Which power state a VM may be asked for: `paused` only on a backend
//! that pauses, and only for a VM that runs (a new VM starts `started` or
//! `stopped`; a stopped one is started first).

use vmaas_model::{PowerState, ValidationErrors};

use crate::error::ApiError;
use crate::state::AppState;
use crate::store::VmRecord;

const FIELD: &str = "object.spec.state";

/// Checks `wanted` for a new VM; a problem goes into `errs`.
pub(super) fn at_create(s: &AppState, wanted: PowerState, errs: &mut ValidationErrors) {
    if wanted == PowerState::Paused {
        let why = match s.backend.capabilities().pause {
            true => "a new VM starts \"started\" or \"stopped\": pause it once it runs".to_owned(),
            false => cannot(s),
        };
        errs.push(FIELD, why);
    }
}

/// Checks `wanted` for `current`: a 400 where the backend cannot pause, a
/// 409 for a stopped VM.
pub(super) fn at_change(s: &AppState, current: &VmRecord, wanted: PowerState, errs: &mut ValidationErrors) -> Result<(), ApiError> {
    if wanted != PowerState::Paused || current.spec.state == PowerState::Paused {
        return Ok(());
    }
    if !s.backend.capabilities().pause {
        errs.push(FIELD, cannot(s));
        return Ok(());
    }
    if current.spec.state == PowerState::Stopped {
        return Err(ApiError::precondition(format!("virtual machine {:?} is stopped: start it, then pause it", current.name)));
    }
    Ok(())
}

fn cannot(s: &AppState) -> String {
    format!("the {} backend cannot pause VMs (see docs/backends.md)", s.backend.name())
}
