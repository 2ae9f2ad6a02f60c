//! Clones on Kubernetes: a KubeVirt `VirtualMachineClone` makes the
//! clone's KubeVirt VM from a VM or a `VirtualMachineSnapshot` (new MACs
//! and SMBIOS serial, the disks restored from snapshots of the source's),
//! and the claims it made are what the clone's disks are afterwards.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::names::derived;

/// The name of the `VirtualMachineClone` making KubeVirt VM `target`.
pub fn vm_clone_name(target: &str) -> String {
    derived(target, "clone")
}

/// The `VirtualMachineClone` making KubeVirt VM `target` in `namespace`
/// from `source` (`apiGroup`, `kind`, `name`).
pub fn vm_clone(target: &str, namespace: &str, source: &Value) -> Value {
    json!({
        "apiVersion": "clone.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClone",
        "metadata": {"name": vm_clone_name(target), "namespace": namespace},
        "spec": {
            "source": source,
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": target},
        },
    })
}

/// What a `VirtualMachineClone`'s status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloneSeen {
    /// KubeVirt made the target VM (`phase: Succeeded`).
    Done,
    /// Under way; the words say how far.
    Pending(String),
    /// KubeVirt gave up (`phase: Failed`).
    Failed(String),
}

/// What `clone` (the `VirtualMachineClone`, if it exists) says.
pub fn observe_vm_clone(clone: Option<&Value>) -> CloneSeen {
    let Some(clone) = clone else { return CloneSeen::Pending("the VirtualMachineClone is being made".into()) };
    let st = &clone["status"];
    let message = st["conditions"].as_array().and_then(|c| c.iter().rev().find_map(|c| c["message"].as_str())).unwrap_or("");
    match st["phase"].as_str().unwrap_or("") {
        "Succeeded" => CloneSeen::Done,
        "Failed" => CloneSeen::Failed(format!("KubeVirt's clone failed: {message}")),
        "" => CloneSeen::Pending("waiting for KubeVirt's clone controller".into()),
        phase => CloneSeen::Pending(format!("KubeVirt's clone is {phase}")),
    }
}

/// The claim behind each volume of KubeVirt VM `vm` that has one (a
/// DataVolume or a PVC), by volume name.
pub fn claims_of(vm: &Value) -> BTreeMap<String, String> {
    let volumes = vm["spec"]["template"]["spec"]["volumes"].as_array().cloned().unwrap_or_default();
    volumes
        .iter()
        .filter_map(|v| {
            let claim = v["dataVolume"]["name"].as_str().or(v["persistentVolumeClaim"]["claimName"].as_str())?;
            Some((v["name"].as_str()?.to_owned(), claim.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_names_its_source_and_target() {
        let c = vm_clone("copy", "vmaas-acme", &json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"}));
        assert_eq!(c["spec"]["target"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "copy"}));
        assert_eq!(c["spec"]["source"]["name"], "web");
        assert_eq!(c["metadata"]["name"], "copy-clone");
    }

    #[test]
    fn status_and_claims_read_as_kubevirt_writes_them() {
        assert_eq!(observe_vm_clone(Some(&json!({"status": {"phase": "Succeeded"}}))), CloneSeen::Done);
        let failed = json!({"status": {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "message": "no snapshot"}]}});
        assert_eq!(observe_vm_clone(Some(&failed)), CloneSeen::Failed("KubeVirt's clone failed: no snapshot".into()));
        assert!(matches!(observe_vm_clone(Some(&json!({"status": {"phase": "RestoreInProgress"}}))), CloneSeen::Pending(_)));
        let vm = json!({"spec": {"template": {"spec": {"volumes": [
            {"name": "rootdisk", "dataVolume": {"name": "restore-1a2b-rootdisk"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "restore-1a2b-data"}},
            {"name": "cloudinitdisk", "cloudInitNoCloud": {"userData": ""}}]}}}});
        let claims = claims_of(&vm);
        assert_eq!(claims.len(), 2);
        assert_eq!(claims["rootdisk"], "restore-1a2b-rootdisk");
    }
}
