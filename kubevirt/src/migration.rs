//! Live migration on a cluster: a request (by generation) becomes a
//! KubeVirt `VirtualMachineInstanceMigration` of the VM's VMI, optionally
//! pinned to a node; while the newest one is under way the VM is
//! MIGRATING; when it failed, the VM is DEGRADED saying why, until the
//! next migration.

use std::sync::Arc;

use kube::core::DynamicObject;
use serde_json::{Value, json};
use vmaas_model::k8s::names::derived;
use vmaas_model::{ObjectKind, Reason};

use crate::names::labels;

/// Annotation on the KubeVirt VM: the migration generation acted on.
pub const ANNOTATION: &str = "vmaas.io/migrate-generation";
/// Annotation on a migration: its generation.
const GENERATION: &str = "vmaas.io/generation";
/// The node label a migration's target is chosen by.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// Migration `generation` of the VMI `name` in `ns` (vmaas VM `id`), to `node` if given.
pub fn manifest(ns: &str, name: &str, id: &str, generation: u64, node: Option<&str>) -> Value {
    let mut m = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": derived(name, &format!("migration-{generation}")), "namespace": ns,
            "labels": labels(ObjectKind::VirtualMachine, id), "annotations": {GENERATION: generation.to_string()}},
        "spec": {"vmiName": name},
    });
    if let Some(n) = node {
        m["spec"]["addedNodeSelector"] = json!({ HOSTNAME: n });
    }
    m
}

/// Why KubeVirt says the VMI `vmi` cannot live-migrate (its
/// `LiveMigratable` condition is false: e.g. a disk that is not shared, a
/// host device), if it says so. KubeVirt's admission refuses a migration
/// of such a VMI; the server does not ask.
pub fn refusal(vmi: &Value) -> Option<Reason> {
    let c = vmi["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "LiveMigratable" && c["status"] == "False")?;
    let why = c["message"].as_str().filter(|m| !m.is_empty()).or(c["reason"].as_str()).unwrap_or("no reason given");
    Some(Reason::new("MigrationRefused", format!("KubeVirt says the VM cannot live-migrate: {why}")))
}

/// Where the newest of `migrations` is: `Ok(Some)` while under way (the
/// reason to show), `Err` when it failed (why), `Ok(None)` when none is
/// under way.
pub fn state(migrations: &[Arc<DynamicObject>]) -> Result<Option<Reason>, Reason> {
    let generation =
        |m: &DynamicObject| m.metadata.annotations.as_ref().and_then(|a| a.get(GENERATION)).and_then(|g| g.parse::<u64>().ok());
    let Some(newest) = migrations.iter().max_by_key(|m| generation(m)) else { return Ok(None) };
    let phase = newest.data["status"]["phase"].as_str().unwrap_or("Pending");
    let to = newest.data["spec"]["addedNodeSelector"][HOSTNAME].as_str().map(|n| format!(" to node {n}")).unwrap_or_default();
    match phase {
        "Succeeded" => Ok(None),
        "Failed" => {
            let why = newest.data["status"]["migrationState"]["failureReason"].as_str().unwrap_or("KubeVirt gives no reason");
            Err(Reason::new("MigrationFailed", format!("the live migration{to} failed: {why}")))
        }
        p => Ok(Some(Reason::new("Migrating", format!("live migration{to}: {p}")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migration(generation: u64, status: Value) -> Arc<DynamicObject> {
        let mut m = manifest("ns", "web", "id-1", generation, Some("node-2"));
        m["status"] = status;
        Arc::new(serde_json::from_value(m).unwrap())
    }

    #[test]
    fn the_newest_migration_decides() {
        assert_eq!(state(&[]), Ok(None));
        let done = migration(1, json!({"phase": "Succeeded"}));
        let running = migration(2, json!({"phase": "Running"}));
        assert!(matches!(state(&[done.clone(), running.clone()]), Ok(Some(r)) if r.message == "live migration to node node-2: Running"));
        let failed = migration(3, json!({"phase": "Failed", "migrationState": {"failureReason": "no space"}}));
        assert!(matches!(state(&[running, failed.clone(), done]), Err(r) if r.message.ends_with("failed: no space")));
        let later = migration(4, json!({"phase": "Succeeded"}));
        assert_eq!(state(&[failed, later]), Ok(None), "a later success clears a failure");
    }

    #[test]
    fn a_vmi_kubevirt_calls_unmovable_is_not_migrated() {
        let stuck = json!({"status": {"conditions": [{"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable", "message": "PVC data is not shared"}]}});
        assert!(refusal(&stuck).is_some_and(|r| r.message.ends_with("PVC data is not shared")));
        assert_eq!(refusal(&json!({"status": {"conditions": [{"type": "LiveMigratable", "status": "True"}]}})), None);
        assert_eq!(refusal(&json!({})), None);
    }

    #[test]
    fn a_target_node_is_a_node_selector() {
        let m = manifest("ns", "web", "id-1", 7, Some("node-2"));
        assert_eq!(m["spec"], json!({"vmiName": "web", "addedNodeSelector": {"kubernetes.io/hostname": "node-2"}}));
        assert_eq!(m["metadata"]["name"], "web-migration-7");
        assert!(manifest("ns", "web", "id-1", 1, None)["spec"].get("addedNodeSelector").is_none());
    }
}
