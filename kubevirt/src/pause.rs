//! Pausing a running VM on a cluster, as `virtctl pause vm` does: a `PUT`
//! of its VMI's `pause` (or `unpause`) subresource, which virt-api serves
//! behind the API server's aggregation layer (`subresources.kubevirt.io/v1`).
//! KubeVirt freezes the guest's vCPUs and reports it with the VMI's
//! `Paused` condition, which the observation reads
//! (`vmaas_model::k8s::observe::paused`). The call is asked while the VMI
//! runs and is not yet as wanted; virt-api's 409 (already so) is done.

use tracing::info;
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::PowerState;
use vmaas_model::k8s::observe::{Paused, paused};

use crate::cluster::{as_json, is_status};
use crate::shared::Shared;

/// What to ask of a VMI to make it as `wanted` (none: nothing).
fn action(wanted: PowerState, running: bool, seen: Option<Paused>) -> Option<&'static str> {
    match (wanted, running, seen) {
        (_, false, _) => None,
        (PowerState::Paused, true, None) => Some("pause"),
        // KubeVirt's own pause on an I/O error is KubeVirt's to lift.
        (PowerState::Started, true, Some(Paused::ByUser)) => Some("unpause"),
        _ => None,
    }
}

impl Shared {
    /// Pauses or resumes VM `t`'s VMI in `ns` as its power state asks.
    pub(crate) async fn sync_pause(&self, t: &VmTarget, ns: &str) -> Result<(), BackendError> {
        let Some(vmi) = self.vmis.get(ns, &t.name) else { return Ok(()) };
        let vmi = as_json(&vmi);
        let Some(action) = action(t.spec.power, vmi["status"]["phase"] == "Running", paused(&vmi)) else { return Ok(()) };
        let path = format!("/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{}/{action}", t.name);
        let context = format!("asking KubeVirt to {action} VirtualMachineInstance {ns}/{}", t.name);
        let request = http::Request::put(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b"{}".to_vec())
            .map_err(|e| BackendError::invalid(context.clone(), e))?;
        match self.cluster.client().request_text(request).await {
            Ok(_) => {
                info!(vm = %t.id, action, "asked KubeVirt");
                Ok(())
            }
            // Already so, or the VMI has just gone: the next look sees it.
            Err(e) if is_status(&e, 409) || is_status(&e, 404) => Ok(()),
            Err(e) => Err(crate::cluster::failure(context, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_running_vmi_not_yet_as_wanted_is_asked() {
        assert_eq!(action(PowerState::Paused, true, None), Some("pause"));
        assert_eq!(action(PowerState::Paused, true, Some(Paused::ByUser)), None);
        assert_eq!(action(PowerState::Paused, false, None), None, "a VMI that does not run yet is paused once it does");
        assert_eq!(action(PowerState::Started, true, Some(Paused::ByUser)), Some("unpause"));
        assert_eq!(action(PowerState::Started, true, Some(Paused::IoError)), None);
        assert_eq!(action(PowerState::Stopped, true, Some(Paused::ByUser)), None, "stopping is runStrategy Halted's");
    }
}
