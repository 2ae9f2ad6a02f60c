//! What the function reports on an XR, in the shapes Crossplane accepts:
//! the XR's `status` holds only fields its XRD declares (Crossplane owns
//! `status.conditions` and computes `Ready` from the composed resources'
//! readiness), and the VM's own state goes in a function condition
//! (`VirtualMachineReady`, with a reason and a message) that Crossplane
//! applies to the XR.

use function_sdk_rust::proto::v1::{RunFunctionResponse, Target};
use function_sdk_rust::response;
use serde_json::{Value, json};
use vmaas_model::{ConditionStatus, ConditionType, VirtualMachineStatus, VmState};

/// Addresses every condition and result of `rsp` to the XR and its claim
/// (Crossplane's `TargetCompositeAndClaim`): a tenant reads its claim, not
/// the cluster-scoped XR, so the VM's state, a load balancer waiting for
/// its hosts and every warning must reach it. An XR without a claim gets
/// them all the same.
pub fn to_claim(rsp: &mut RunFunctionResponse) {
    let both = Some(Target::CompositeAndClaim as i32);
    for c in &mut rsp.conditions {
        c.target = both;
    }
    for r in &mut rsp.results {
        r.target = both;
    }
}

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

fn text_of(xr: &Value, field: &str) -> String {
    xr["status"][field].as_str().unwrap_or_default().to_owned()
}

/// Type of the function's condition on a network XR.
pub const NETWORK_CONDITION: &str = "NetworkReady";

/// A network's state as OVN-K reports it on its (C)UDN: the condition
/// `NetworkCreated` (`NetworkReady` in older releases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkState {
    /// `READY`, `PENDING` or `FAILED`.
    pub state: &'static str,
    /// The reason, in CamelCase.
    pub reason: String,
    /// OVN-K's message, if any.
    pub message: String,
}

impl NetworkState {
    /// The state of an observed UDN or CUDN (`None`: not created yet).
    pub fn of(observed: Option<&Value>) -> Self {
        let cond = observed
            .and_then(|o| o["status"]["conditions"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == "NetworkCreated").or_else(|| cs.iter().find(|c| c["type"] == "NetworkReady")));
        let text = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_owned();
        match cond {
            Some(c) if c["status"] == "True" => Self { state: "READY", reason: text(c, "reason"), message: text(c, "message") },
            Some(c) if c["status"] == "False" => Self { state: "FAILED", reason: text(c, "reason"), message: text(c, "message") },
            _ => Self { state: "PENDING", reason: "Pending".into(), message: "waiting for OVN-Kubernetes to create the network".into() },
        }
    }

    /// The state of a network XR, as this function wrote it in its status.
    pub fn of_xr(xr: &Value) -> Self {
        match xr["status"]["state"].as_str() {
            Some("READY") => Self { state: "READY", reason: "Ready".into(), message: String::new() },
            Some("FAILED") => Self { state: "FAILED", reason: "Failed".into(), message: text_of(xr, "message") },
            _ => Self { state: "PENDING", reason: "Pending".into(), message: text_of(xr, "message") },
        }
    }

    /// Whether VMs can attach.
    pub fn ready(&self) -> bool {
        self.state == "READY"
    }

    /// The network XR's `status`: the state, its message, and `fields`.
    pub fn to_status(&self, fields: Value) -> Value {
        let mut s = json!({ "state": self.state });
        if !self.message.is_empty() {
            s["message"] = json!(self.message);
        }
        if let (Some(o), Some(f)) = (s.as_object_mut(), fields.as_object()) {
            o.extend(f.clone());
        }
        s
    }

    /// Adds the `NetworkReady` condition to the response.
    pub fn condition(&self, rsp: &mut RunFunctionResponse) {
        let reason = if self.reason.is_empty() { camel(self.state) } else { self.reason.clone() };
        let c = if self.ready() {
            response::condition_true(rsp, NETWORK_CONDITION, reason)
        } else {
            response::condition_false(rsp, NETWORK_CONDITION, reason)
        };
        if !self.message.is_empty() {
            c.message = Some(self.message.clone());
        }
    }
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

    #[test]
    fn a_network_is_ready_when_ovn_k_created_it() {
        assert_eq!(NetworkState::of(None).state, "PENDING");
        let created = json!({"status": {"conditions": [
            {"type": "NetworkCreated", "status": "True", "reason": "NetworkAttachmentDefinitionCreated", "message": "created"}]}});
        let s = NetworkState::of(Some(&created));
        assert!(s.ready());
        assert_eq!(
            s.to_status(json!({"ipv4Cidr": "10.0.0.0/24"})),
            json!({"state": "READY", "message": "created", "ipv4Cidr": "10.0.0.0/24"})
        );
        let bad = json!({"status": {"conditions": [{"type": "NetworkCreated", "status": "False", "reason": "SyncError", "message": "overlaps"}]}});
        let s = NetworkState::of(Some(&bad));
        assert_eq!((s.state, s.reason.as_str()), ("FAILED", "SyncError"));
        let mut rsp = RunFunctionResponse::default();
        s.condition(&mut rsp);
        assert_eq!((rsp.conditions[0].r#type.as_str(), rsp.conditions[0].message.as_deref()), (NETWORK_CONDITION, Some("overlaps")));
    }
}
