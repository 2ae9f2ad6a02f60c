//! Snapshots of a VM's disks (OSAC's design calls them
//! `ComputeInstanceSnapshot`): every disk of one VM (its machine's disks
//! and the volumes attached to it) as they were at one instant, taken
//! while the guest runs (online) or while it is stopped. A snapshot is
//! taken once; it is READY with its size and how consistent it is, and
//! stays until it is deleted (or its VM is, unless the VM's deletion asks
//! to keep its snapshots). A VM is restored in place from one of its
//! snapshots (`POST /virtual_machines/{id}/restore`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The `@type` of a snapshot in API responses.
pub const SNAPSHOT_TYPE_URL: &str = "type.googleapis.com/vmaas.v1.ComputeInstanceSnapshot";

/// What the tenant asks for: a snapshot of one of its VMs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ComputeInstanceSnapshotSpec {
    /// The VM, by id or name (stored as the id); immutable.
    pub compute_instance: String,
}

impl ComputeInstanceSnapshotSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.compute_instance.trim().is_empty() {
            errs.push(format!("{prefix}.compute_instance"), "is required: the id or name of one of your virtual machines");
        }
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of a snapshot, as OSAC's design names them.
    ComputeInstanceSnapshotState {
        /// Being taken.
        Creating = "COMPUTE_INSTANCE_SNAPSHOT_STATE_CREATING",
        /// Taken: the VM can be restored from it.
        Ready = "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY",
        /// Could not be taken; see the message.
        Failed = "COMPUTE_INSTANCE_SNAPSHOT_STATE_FAILED",
        /// Being removed.
        Deleting = "COMPUTE_INSTANCE_SNAPSHOT_STATE_DELETING",
    }
}

crate::wire_states! {
    /// How consistent the disks of a snapshot are with each other and with
    /// the guest's file systems.
    SnapshotConsistency {
        /// As if the power had been cut at that instant: every disk at the
        /// same instant, file systems to be replayed from their journals.
        CrashConsistent = "SNAPSHOT_CONSISTENCY_CRASH_CONSISTENT",
        /// The guest froze its file systems for the instant (a guest agent
        /// answered): they are clean.
        FilesystemFrozen = "SNAPSHOT_CONSISTENCY_FILESYSTEM_FROZEN",
        /// Taken while the VM was stopped: what its disks hold at rest.
        Stopped = "SNAPSHOT_CONSISTENCY_STOPPED",
    }
}

/// One disk in a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnapshotDisk {
    /// The machine's disk by name (e.g. `root`), or `volume:ID` for a volume.
    pub name: String,
    /// The bytes its snapshot holds beyond the image it starts from.
    pub size_bytes: u64,
}

/// What the snapshot is now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ComputeInstanceSnapshotStatus {
    /// Overall state.
    pub state: ComputeInstanceSnapshotState,
    /// Whether the guest was running when it was taken.
    #[serde(default)]
    pub online: bool,
    /// How consistent it is, once taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<SnapshotConsistency>,
    /// The bytes it holds, all disks together (what counts against the
    /// tenant's disk quota).
    #[serde(default)]
    pub size_bytes: u64,
    /// Its disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<SnapshotDisk>,
    /// When it was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<DateTime<Utc>>,
    /// The template of its VM when it was taken (a clone of it takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The template parameters of its VM when it was taken.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub template_parameters: std::collections::BTreeMap<String, crate::ParameterValue>,
    /// Why it is being taken still, or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

crate::api_object! {
    /// A snapshot as the API returns it.
    ComputeInstanceSnapshot {
        kind: ComputeInstanceSnapshot,
        spec: ComputeInstanceSnapshotSpec,
        status: ComputeInstanceSnapshotStatus,
        type_url: "type.googleapis.com/vmaas.v1.ComputeInstanceSnapshot"
    }
}

/// What a new VM's disks are a copy of (`spec.clone_of`): one of the
/// tenant's VMs (running or stopped) or snapshots, by id or name (stored as
/// the id); exactly one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CloneOf {
    /// A VM: its disks as they are when the clone is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_instance: Option<String>,
    /// A snapshot: its disks as they were taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

impl CloneOf {
    /// Checks that it names exactly one source, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let given = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.trim().is_empty());
        match (given(&self.compute_instance), given(&self.snapshot)) {
            (true, false) | (false, true) => {}
            (true, true) => errs.push(prefix.to_owned(), "names both a compute_instance and a snapshot: name one"),
            (false, false) => errs.push(prefix.to_owned(), "must name a compute_instance or a snapshot (an id or a name)"),
        }
        errs.into_result(())
    }
}

/// What `POST /virtual_machines/{id}/restore` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// The snapshot of this VM to go back to, by id or name.
    pub snapshot: String,
    /// Stop the VM for the restore if it runs (else a running VM is refused
    /// with 409); it starts again once its disks are back.
    #[serde(default)]
    pub stop: bool,
}

impl RestoreRequest {
    /// Checks what the request says by itself.
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.snapshot.trim().is_empty() {
            errs.push("snapshot", "is required: the id or name of a snapshot of this virtual machine");
        }
        errs.into_result(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_snapshot_names_its_vm() {
        let ok: ComputeInstanceSnapshotSpec = serde_json::from_value(json!({"compute_instance": "web"})).unwrap();
        assert!(ok.check("object.spec").is_ok());
        let e = serde_json::from_value::<ComputeInstanceSnapshotSpec>(json!({"compute_instance": " "})).unwrap().check("object.spec");
        assert_eq!(e.unwrap_err().0[0].field, "object.spec.compute_instance");
        assert!(serde_json::from_value::<ComputeInstanceSnapshotSpec>(json!({"compute_instance": "a", "memory": true})).is_err());
    }

    #[test]
    fn states_and_consistency_have_osac_wire_names() {
        let s = ComputeInstanceSnapshotStatus {
            state: ComputeInstanceSnapshotState::Ready,
            online: true,
            consistency: Some(SnapshotConsistency::CrashConsistent),
            ..Default::default()
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["state"], "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY");
        assert_eq!(v["consistency"], "SNAPSHOT_CONSISTENCY_CRASH_CONSISTENT");
        assert_eq!(v["online"], true);
    }

    #[test]
    fn a_clone_names_one_source() {
        let one: CloneOf = serde_json::from_value(json!({"snapshot": "before"})).unwrap();
        assert!(one.check("object.spec.clone_of").is_ok());
        for bad in [json!({}), json!({"snapshot": "a", "compute_instance": "b"}), json!({"snapshot": " "})] {
            let c: CloneOf = serde_json::from_value(bad.clone()).unwrap();
            assert_eq!(c.check("object.spec.clone_of").unwrap_err().0[0].field, "object.spec.clone_of", "{bad}");
        }
    }

    #[test]
    fn a_restore_names_a_snapshot() {
        let r: RestoreRequest = serde_json::from_value(json!({"snapshot": "before", "stop": true})).unwrap();
        assert!(r.check().is_ok() && r.stop);
        let bare: RestoreRequest = serde_json::from_value(json!({"snapshot": ""})).unwrap();
        assert_eq!(bare.check().unwrap_err().0[0].field, "snapshot");
        assert!(!bare.stop, "stopping a running VM is asked for, never assumed");
    }
}
