//! Snapshots on Kubernetes: a KubeVirt `VirtualMachineSnapshot` of the
//! VM's KubeVirt VM (KubeVirt's snapshot controller takes its volumes'
//! CSI snapshots, freezing the guest's file systems through its agent when
//! one answers), and what its status says.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::names::derived;

/// The name of snapshot `snapshot`'s `VirtualMachineSnapshot`.
pub fn vm_snapshot_name(snapshot: &str) -> String {
    derived(snapshot, "snap")
}

/// The `VirtualMachineSnapshot` of snapshot `snapshot` of the KubeVirt VM
/// `vm` in `namespace` (its content deleted with it).
pub fn vm_snapshot(snapshot: &str, namespace: &str, vm: &str) -> Value {
    json!({
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineSnapshot",
        "metadata": {"name": vm_snapshot_name(snapshot), "namespace": namespace},
        "spec": {
            "source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm},
            "deletionPolicy": "delete",
        },
    })
}

/// What a `VirtualMachineSnapshot`'s status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotSeen {
    /// Taken (`readyToUse`).
    Ready {
        /// The VM ran (indication `Online`).
        online: bool,
        /// The guest agent froze the file systems (indication `GuestAgent`).
        frozen: bool,
        /// The volumes in it (`snapshotVolumes.includedVolumes`).
        volumes: Vec<String>,
        /// When it was taken (`creationTime`).
        taken_at: Option<DateTime<Utc>>,
    },
    /// Being taken; the words say how far.
    Pending(String),
    /// KubeVirt gave up (`phase: Failed`, or an `error`).
    Failed(String),
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

/// What `snap` (the `VirtualMachineSnapshot`, if it exists) says.
pub fn observe_vm_snapshot(snap: Option<&Value>) -> SnapshotSeen {
    let Some(snap) = snap else { return SnapshotSeen::Pending("the VirtualMachineSnapshot is being made".into()) };
    let st = &snap["status"];
    let error = st["error"]["message"].as_str().map(str::to_owned);
    if st["phase"] == "Failed" {
        return SnapshotSeen::Failed(error.unwrap_or_else(|| "KubeVirt's snapshot failed".into()));
    }
    if st["readyToUse"] == true {
        let indications = strings(&st["indications"]);
        return SnapshotSeen::Ready {
            online: indications.iter().any(|i| i == "Online"),
            frozen: indications.iter().any(|i| i == "GuestAgent"),
            volumes: strings(&st["snapshotVolumes"]["includedVolumes"]),
            taken_at: st["creationTime"].as_str().and_then(|t| t.parse().ok()),
        };
    }
    let phase = st["phase"].as_str().unwrap_or("Unknown");
    SnapshotSeen::Pending(match error {
        Some(e) => format!("KubeVirt's snapshot is {phase}: {e}"),
        None => format!("KubeVirt's snapshot is {phase}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_names_its_vm_and_deletes_its_content_with_it() {
        let s = vm_snapshot("0b3c5e0e-1234-4abc-9def-000000000001", "vmaas-acme", "web");
        assert_eq!(s["spec"]["source"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"}));
        assert_eq!(s["spec"]["deletionPolicy"], "delete");
        assert_eq!(s["metadata"]["name"], vm_snapshot_name("0b3c5e0e-1234-4abc-9def-000000000001"));
    }

    #[test]
    fn status_reads_as_kubevirt_writes_it() {
        assert!(matches!(observe_vm_snapshot(None), SnapshotSeen::Pending(_)));
        let taken = json!({"status": {"readyToUse": true, "phase": "Succeeded", "creationTime": "2026-11-27T05:00:00Z",
            "indications": ["Online", "GuestAgent"], "snapshotVolumes": {"includedVolumes": ["rootdisk"]}}});
        assert_eq!(
            observe_vm_snapshot(Some(&taken)),
            SnapshotSeen::Ready {
                online: true,
                frozen: true,
                volumes: vec!["rootdisk".into()],
                taken_at: "2026-11-27T05:00:00Z".parse().ok()
            }
        );
        let failed = json!({"status": {"phase": "Failed", "error": {"message": "deadline exceeded"}}});
        assert_eq!(observe_vm_snapshot(Some(&failed)), SnapshotSeen::Failed("deadline exceeded".into()));
        let going = json!({"status": {"phase": "InProgress", "readyToUse": false}});
        assert_eq!(observe_vm_snapshot(Some(&going)), SnapshotSeen::Pending("KubeVirt's snapshot is InProgress".into()));
    }
}
