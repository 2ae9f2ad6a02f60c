//! A VM moved to another cluster: its `spec.placement` changed while it is
//! to be stopped. The server's fleet then moves it once it is STOPPED
//! (its boot disk exported where it is, taken in where it goes, the VM
//! made there and removed from where it was); a VM to be running is never
//! moved, so its placement changes only with (or after) a stop.

use vmaas_model::{PowerState, ValidationErrors};

use crate::store::VmRecord;

use super::resolve::check_placement;

/// Checks a change of VM `current`'s placement to `to`, `next` being the
/// VM as the change leaves it.
pub(super) fn check(
    backend: &dyn vmaas_backend::Backend,
    current: &VmRecord,
    next: &VmRecord,
    to: Option<&vmaas_model::Placement>,
    errs: &mut ValidationErrors,
) {
    let describe = to.map_or_else(|| "anywhere".to_owned(), vmaas_model::Placement::describe);
    const FIELD: &str = "object.spec.placement";
    if backend.clusters().is_empty() {
        return errs.push(FIELD, "this server drives one cluster: there is nowhere to move the VM (see --cluster)");
    }
    if next.spec.state != PowerState::Stopped {
        let why = format!(
            "cannot change to {} while virtual machine {:?} is to run: a VM moves between clusters stopped; change spec.state to stopped with it (or first)",
            describe, current.name
        );
        return errs.push(FIELD, why);
    }
    if !current.spec.additional_disks.is_empty() || current.machine.disks.len() > 1 {
        let why = "a VM moves between clusters with its boot disk only, and this one has more disks: it stays where it is";
        return errs.push(FIELD, why);
    }
    check_placement(backend, to, errs);
}
