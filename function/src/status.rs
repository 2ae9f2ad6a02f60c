//! What the function reports on an XR, in the shapes Crossplane accepts:
//! the XR's `status` holds only fields its XRD declares (Crossplane owns
//! `status.conditions` and computes `Ready` from the composed resources'
//! readiness), and the VM's own state goes in a function condition
//! (`VirtualMachineReady`, with a reason and a message) that Crossplane
//! applies to the XR.

use function_sdk_rust::proto::v1::RunFunctionResponse;
use function_sdk_rust::response;
use serde_json::{Value, json};
use vmaas_model::{ConditionStatus, ConditionType, VirtualMachineStatus, VmState};

/// Type of the function's condition on a VM XR.
pub const VM_CONDITION: &str = "VirtualMachineReady";

/// The condition that explains `status.state`, with its reason and message.
fn explaining(status: &VirtualMachineStatus) -> (String, String) {
    let kind = match status.state {
        VmState::Failed => ConditionType::Failed,
        VmState::Ready => ConditionType::Ready,
        _ => ConditionType::Progressing,
    };
    let c = status.condition(kind).filter(|c| c.status == ConditionStatus::True);
    let reason = c.and_then(|c| c.reason.clone()).unwrap_or_else(|| camel(status.state.short()));
    (reason, c.map(|c| c.message.clone()).unwrap_or_default())
}

/// `READY` → `Ready`: a condition reason in Kubernetes' CamelCase.
fn camel(s: &str) -> String {
    let lower = s.to_lowercase();
    let mut c = lower.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

/// The VM XR's `status`: `state` (`READY`, `PROGRESSING`, …), the
/// addresses, and what the state means in words.
pub fn vm_status(status: &VirtualMachineStatus) -> Value {
    let (_, message) = explaining(status);
    let mut s = json!({ "state": status.state.short() });
    if let Some(ip) = &status.internal_ip {
        s["internalIP"] = json!(ip);
    }
    if let Some(ip) = &status.external_ip {
        s["externalIP"] = json!(ip);
    }
    if !message.is_empty() {
        s["message"] = json!(message);
    }
    s
}

/// Adds the `VirtualMachineReady` condition to the response.
pub fn vm_condition(rsp: &mut RunFunctionResponse, status: &VirtualMachineStatus) {
    let (reason, message) = explaining(status);
    let c = if status.state == VmState::Ready {
        response::condition_true(rsp, VM_CONDITION, reason)
    } else {
        response::condition_false(rsp, VM_CONDITION, reason)
    };
    if !message.is_empty() {
        c.message = Some(message);
    }
}

/// The private network XR's `status`.
pub fn network_status(namespace: &str, cidr: &str) -> Value {
    json!({ "namespace": namespace, "ipv4Cidr": cidr })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmaas_model::{Desired, Observation, Phase, PowerState, Reason, derive_status};

    fn status(phase: Phase) -> VirtualMachineStatus {
        let mut o = Observation::new(phase);
        o.internal_ip = Some("10.0.0.5".into());
        derive_status(Desired::Power(PowerState::Started), &o, &VirtualMachineStatus::default(), chrono::Utc::now())
    }

    #[test]
    fn the_xr_status_has_only_declared_fields_and_the_condition_explains_it() {
        let failed = status(Phase::Failed(Reason::new("DataVolumeError", "the boot image cannot be cloned")));
        assert_eq!(vm_status(&failed), json!({"state": "FAILED", "internalIP": "10.0.0.5", "message": "the boot image cannot be cloned"}));
        let mut rsp = RunFunctionResponse::default();
        vm_condition(&mut rsp, &failed);
        let c = &rsp.conditions[0];
        assert_eq!((c.r#type.as_str(), c.reason.as_str()), (VM_CONDITION, "DataVolumeError"));
        let mut rsp = RunFunctionResponse::default();
        vm_condition(&mut rsp, &status(Phase::Ready));
        assert!(!rsp.conditions[0].reason.is_empty());
        assert_eq!(vm_status(&status(Phase::Ready))["state"], "READY");
    }
}
