//! Restores on Kubernetes: a KubeVirt `VirtualMachineRestore` that puts a
//! VM's volumes back as its `VirtualMachineSnapshot` holds them, in place
//! (`volumeRestorePolicy: InPlace`: the restored claims keep their names,
//! so the VM renders as before), and what its status says.

use serde_json::{Value, json};

use super::names::derived;

/// The name of restore generation `generation` of the KubeVirt VM `vm`.
pub fn vm_restore_name(vm: &str, generation: u64) -> String {
    derived(vm, &format!("restore-{generation}"))
}

/// The `VirtualMachineRestore` of the KubeVirt VM `vm` in `namespace` from
/// the `VirtualMachineSnapshot` named `snapshot`, for restore generation
/// `generation`.
pub fn vm_restore(vm: &str, namespace: &str, snapshot: &str, generation: u64) -> Value {
    json!({
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineRestore",
        "metadata": {"name": vm_restore_name(vm, generation), "namespace": namespace},
        "spec": {
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm},
            "virtualMachineSnapshotName": snapshot,
            "volumeRestorePolicy": "InPlace",
        },
    })
}

/// What a `VirtualMachineRestore`'s status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreSeen {
    /// KubeVirt put the volumes back (`complete`): the volumes it restored.
    Complete(Vec<String>),
    /// Under way; the words say how far.
    Pending(String),
    /// KubeVirt gave up (a `Failure` condition).
    Failed(String),
}

fn condition<'a>(st: &'a Value, kind: &str) -> Option<&'a Value> {
    st["conditions"].as_array()?.iter().find(|c| c["type"] == kind && c["status"] == "True")
}

/// What `restore` (the `VirtualMachineRestore`, if it exists) says.
pub fn observe_vm_restore(restore: Option<&Value>) -> RestoreSeen {
    let Some(restore) = restore else { return RestoreSeen::Pending("the VirtualMachineRestore is being made".into()) };
    let st = &restore["status"];
    if let Some(c) = condition(st, "Failure") {
        return RestoreSeen::Failed(c["message"].as_str().or(c["reason"].as_str()).unwrap_or("KubeVirt's restore failed").to_owned());
    }
    if st["complete"] == true {
        let volumes = st["restores"].as_array().map(|r| r.iter().filter_map(|v| v["volumeName"].as_str().map(str::to_owned)).collect());
        return RestoreSeen::Complete(volumes.unwrap_or_default());
    }
    let how = condition(st, "Progressing").and_then(|c| c["message"].as_str()).unwrap_or("waiting for KubeVirt's restore controller");
    RestoreSeen::Pending(format!("KubeVirt's restore: {how}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_targets_its_vm_in_place_and_is_named_per_generation() {
        let r = vm_restore("web", "vmaas-acme", "snap-1", 3);
        assert_eq!(r["spec"]["target"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"}));
        assert_eq!(r["spec"]["virtualMachineSnapshotName"], "snap-1");
        assert_eq!(r["spec"]["volumeRestorePolicy"], "InPlace");
        assert_eq!(r["metadata"]["name"], "web-restore-3");
        assert_ne!(vm_restore_name("web", 3), vm_restore_name("web", 4));
    }

    #[test]
    fn status_reads_as_kubevirt_writes_it() {
        assert!(matches!(observe_vm_restore(None), RestoreSeen::Pending(_)));
        let done = json!({"status": {"complete": true, "restores": [{"volumeName": "rootdisk", "persistentVolumeClaim": "web-root"}]}});
        assert_eq!(observe_vm_restore(Some(&done)), RestoreSeen::Complete(vec!["rootdisk".into()]));
        let failed =
            json!({"status": {"complete": false, "conditions": [{"type": "Failure", "status": "True", "message": "no snapshot"}]}});
        assert_eq!(observe_vm_restore(Some(&failed)), RestoreSeen::Failed("no snapshot".into()));
        let going =
            json!({"status": {"complete": false, "conditions": [{"type": "Progressing", "status": "True", "message": "creating PVCs"}]}});
        assert_eq!(observe_vm_restore(Some(&going)), RestoreSeen::Pending("KubeVirt's restore: creating PVCs".into()));
    }
}
