//! Reading Kubernetes objects back: what KubeVirt, its VMI and a
//! LoadBalancer Service report, mapped into an [`Observation`] that
//! [`crate::derive_status`] turns into the same status every backend shows.

use serde_json::Value;

use crate::vm::migratable::Migratability;
use crate::{Observation, Phase, Reason};

/// `printableStatus` values after which KubeVirt will not start the VM without a change.
const FATAL: [&str; 6] =
    ["ErrorUnschedulable", "ErrImagePull", "ImagePullBackOff", "ErrorPvcNotFound", "DataVolumeError", "CrashLoopBackOff"];

/// The phase of an observed KubeVirt VM, from `status.ready` and `printableStatus`.
pub fn vm_phase(vm: Option<&Value>, started: bool) -> Phase {
    let Some(vm) = vm else { return Phase::Absent };
    let printable = vm["status"]["printableStatus"].as_str().unwrap_or("");
    let ready = vm["status"]["ready"].as_bool().unwrap_or(false);
    match printable {
        p if FATAL.contains(&p) => Phase::Failed(Reason::new(p, format!("KubeVirt reports the VM as {p}"))),
        "Stopped" if !started => Phase::Stopped,
        "Stopping" | "Terminating" => Phase::Stopping(Reason::new(printable, "KubeVirt is stopping the VM")),
        _ if ready => Phase::Ready,
        "" => Phase::Starting(Reason::new("Provisioning", "the KubeVirt VM has no status yet")),
        other => Phase::Starting(Reason::new(other, format!("KubeVirt reports the VM as {other}"))),
    }
}

/// The VM's internal address from its VMI: that of its NIC `nic` (the one
/// on its first network), else the first address it reports.
pub fn vmi_address(vmi: &Value, nic: &str) -> Option<String> {
    let nics = vmi["status"]["interfaces"].as_array()?;
    let address = |n: &Value| n["ipAddress"].as_str().filter(|a| !a.is_empty()).map(str::to_owned);
    nics.iter().filter(|n| n["name"] == nic).find_map(address).or_else(|| nics.iter().find_map(address))
}

/// The ingress address (or host name) of a LoadBalancer Service.
pub fn service_address(svc: &Value) -> Option<String> {
    let first = svc["status"]["loadBalancer"]["ingress"].as_array()?.first()?;
    first["ip"].as_str().or(first["hostname"].as_str()).map(str::to_owned)
}

/// Why KubeVirt holds a VMI's vCPUs (its `Paused` condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paused {
    /// Asked (`PausedByUser`, or no reason given).
    ByUser,
    /// KubeVirt paused it on a disk's I/O error (`PausedIOError`).
    IoError,
}

/// Whether (and why) VMI `vmi` is paused.
pub fn paused(vmi: &Value) -> Option<Paused> {
    let c = vmi["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Paused" && c["status"] == "True")?;
    Some(if c["reason"] == "PausedIOError" { Paused::IoError } else { Paused::ByUser })
}

/// Everything observed of one VM: the KubeVirt VM, its VMI (`nic` names
/// the NIC whose address is the VM's internal one) and its Service.
/// `started`: the VM should run (started or paused).
pub fn observe_vm(vm: Option<&Value>, vmi: Option<&Value>, service: Option<&Value>, started: bool, nic: &str) -> Observation {
    let mut obs = Observation::new(vm_phase(vm, started));
    match vmi.and_then(paused) {
        Some(Paused::ByUser) => obs.phase = Phase::Paused,
        Some(Paused::IoError) => {
            obs.degraded = Some(Reason::new("PausedIOError", "KubeVirt paused the guest on a disk's I/O error (a full or failed volume)"));
        }
        None => {}
    }
    obs.internal_ip = vmi.and_then(|v| vmi_address(v, nic));
    obs.external_ip = service.and_then(service_address);
    obs.restart_required = vm.and_then(restart_required);
    obs.migratable = vmi.and_then(live_migratable);
    obs
}

/// KubeVirt's `LiveMigratable` condition on the VMI, when it has one.
fn live_migratable(vmi: &Value) -> Option<Migratability> {
    let c = vmi["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "LiveMigratable")?;
    Some(match c["status"].as_str() {
        Some("True") => Migratability::Yes,
        _ => Migratability::No(Reason::new(
            c["reason"].as_str().filter(|r| !r.is_empty()).unwrap_or("NotLiveMigratable"),
            c["message"].as_str().unwrap_or("KubeVirt says it cannot live-migrate"),
        )),
    })
}

/// KubeVirt's own `RestartRequired` condition on the VM: a change to its
/// template that the running VMI takes only when it is made again.
fn restart_required(vm: &Value) -> Option<Reason> {
    let c = vm["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "RestartRequired" && c["status"] == "True")?;
    let message = c["message"].as_str().unwrap_or("the VM's template changed; a restart applies it");
    Some(Reason::new("ConfigurationChanged", message))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn maps_kubevirt_status() {
        assert_eq!(vm_phase(None, true), Phase::Absent);
        let ready = json!({"status": {"printableStatus": "Running", "ready": true}});
        assert_eq!(vm_phase(Some(&ready), true), Phase::Ready);
        let stopped = json!({"status": {"printableStatus": "Stopped"}});
        assert_eq!(vm_phase(Some(&stopped), false), Phase::Stopped);
        assert!(matches!(vm_phase(Some(&stopped), true), Phase::Starting(_)));
        let bad = json!({"status": {"printableStatus": "ErrorUnschedulable"}});
        assert!(matches!(vm_phase(Some(&bad), true), Phase::Failed(r) if r.reason == "ErrorUnschedulable"));
        let vmi = json!({"status": {"interfaces": [{"ipAddress": "10.128.0.5"}]}});
        let svc = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}});
        let obs = observe_vm(Some(&ready), Some(&vmi), Some(&svc), true, "default");
        assert_eq!((obs.internal_ip.as_deref(), obs.external_ip.as_deref()), (Some("10.128.0.5"), Some("192.0.2.10")));
        let two = json!({"status": {"interfaces": [
            {"name": "default", "ipAddress": "10.128.0.5"}, {"name": "private", "ipAddress": "10.200.0.7"}]}});
        assert_eq!(vmi_address(&two, "private").as_deref(), Some("10.200.0.7"), "the NIC asked for");
        assert_eq!(vmi_address(&two, "default").as_deref(), Some("10.128.0.5"));
        let pending = json!({"status": {"interfaces": [{"name": "default", "ipAddress": "10.128.0.5"}, {"name": "private"}]}});
        assert_eq!(vmi_address(&pending, "private").as_deref(), Some("10.128.0.5"), "else the first address");
    }

    #[test]
    fn kubevirt_restart_required_is_reported() {
        let changed = json!({"status": {"printableStatus": "Running", "ready": true,
            "conditions": [{"type": "RestartRequired", "status": "True", "message": "a non-live-updatable field was changed"}]}});
        let obs = observe_vm(Some(&changed), None, None, true, "default");
        assert_eq!(obs.restart_required.unwrap().message, "a non-live-updatable field was changed");
        let settled = json!({"status": {"conditions": [{"type": "RestartRequired", "status": "False"}]}});
        assert!(observe_vm(Some(&settled), None, None, true, "default").restart_required.is_none());
    }
}
