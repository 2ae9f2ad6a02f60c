//! Snapshots on the kubevirt backend against a real kube-apiserver with
//! KubeVirt's CRDs: a snapshot is a `VirtualMachineSnapshot` of the VM's
//! KubeVirt VM in its namespace, READY once the test, playing KubeVirt's
//! snapshot controller, writes the status KubeVirt writes (online, the
//! guest agent froze the file systems, the volumes in it); deleting it
//! deletes the object. A restore halts the VM, puts its volumes back
//! through a `VirtualMachineRestore` in place (the test plays KubeVirt's
//! restore controller) and runs it again. An export without the export
//! proxy is refused, naming why.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{VMIS, api_until, env, objects_of, the_vm};
use vmaas_tests::vms::{self, V1};

const SNAPSHOTS: &str = "/apis/snapshot.kubevirt.io/v1beta1/virtualmachinesnapshots";
const RESTORES: &str = "/apis/snapshot.kubevirt.io/v1beta1/virtualmachinerestores";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_a_virtual_machine_snapshot_kubevirt_takes() {
    let (k, _kubevirt, s) = env().await;
    let t = s.token("acme", false);
    let vm = vms::create(&s, &t, "db", "tiny").await;
    vms::wait_ready(&s, &t, &vm).await;
    let body = json!({"object": {"metadata": {"name": "before"}, "spec": {"compute_instance": "db"}}});
    let (st, snap) = s.raw(Method::POST, &format!("{V1}/compute_instance_snapshots"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{snap}");
    let id = snap["object"]["id"].as_str().unwrap().to_owned();

    // The object, in the VM's namespace, naming the VM.
    let deadline = Instant::now() + Duration::from_secs(30);
    let made = loop {
        if let Some(o) = objects_of(&k, SNAPSHOTS, &id).await.into_iter().next() {
            break o;
        }
        assert!(Instant::now() < deadline, "no VirtualMachineSnapshot\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let kv = the_vm(&k, &vm).await;
    assert_eq!(made["metadata"]["namespace"], kv["metadata"]["namespace"]);
    assert_eq!(made["spec"]["source"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": kv["metadata"]["name"]}));
    assert_eq!(made["spec"]["deletionPolicy"], "delete");
    let state = |v: Option<&Value>| v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("").to_owned();
    let (_, now) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots/{id}"), Some(&t), None).await;
    assert_eq!(state(Some(&now["object"])), "COMPUTE_INSTANCE_SNAPSHOT_STATE_CREATING", "not before KubeVirt says so: {now}");

    // KubeVirt's snapshot controller: taken online, the guest agent froze the file systems.
    let status = json!({"phase": "Succeeded", "readyToUse": true, "creationTime": "2026-11-27T06:00:00Z",
        "indications": ["Online", "GuestAgent"], "snapshotVolumes": {"includedVolumes": ["rootdisk"]}});
    let (st, b) = k.write_status(&made, "virtualmachinesnapshots", status).await;
    assert!(st < 300, "{b}");
    let ready =
        api_until(&s, &t, &format!("compute_instance_snapshots/{id}"), "READY", |v| state(v) == "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY")
            .await;
    assert_eq!(ready["status"]["online"], true, "{ready}");
    assert_eq!(ready["status"]["consistency"], "SNAPSHOT_CONSISTENCY_FILESYSTEM_FROZEN", "{ready}");
    assert_eq!(ready["status"]["disks"][0]["name"], "rootdisk", "{ready}");
    assert_eq!(ready["status"]["taken_at"], "2026-11-27T06:00:00Z", "{ready}");

    restore_in_place(&k, &s, &t, &vm, (&id, &made)).await;

    // Not without the export proxy (`kubevirt_exports.rs` has one): refused, naming why.
    let (st, _) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots/{id}/export"), Some(&t), None).await;
    assert_eq!(st, 409);

    // Deleted: the VirtualMachineSnapshot goes too.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/compute_instance_snapshots/{id}"), Some(&t), None).await;
    assert_eq!(st, 202);
    api_until(&s, &t, &format!("compute_instance_snapshots/{id}"), "gone", |v| v.is_none()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !objects_of(&k, SNAPSHOTS, &id).await.is_empty() {
        assert!(Instant::now() < deadline, "the VirtualMachineSnapshot stayed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The VM deleted: its VirtualMachineRestore goes with it.
    assert_eq!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(&t), None).await.0, 202);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !objects_of(&k, RESTORES, &vm).await.is_empty() {
        assert!(Instant::now() < deadline, "the VirtualMachineRestore of a deleted VM stayed:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A restore of running VM `vm` from its snapshot `snap` (the
/// `VirtualMachineSnapshot`): refused without `stop`; with it, the VM is
/// halted, a `VirtualMachineRestore` in place is made once no VMI is left,
/// and the VM runs again, its volumes named as before, once KubeVirt says
/// the restore is complete.
async fn restore_in_place(k: &Cluster, s: &Server, t: &str, vm: &str, (id, snap): (&str, &Value)) {
    let path = format!("{V1}/virtual_machines/{vm}/restore");
    let (st, e) = s.raw(Method::POST, &path, Some(t), Some(json!({"snapshot": id}))).await;
    assert_eq!(st, 409, "a running VM is not restored without stop: {e}");
    assert!(objects_of(k, RESTORES, vm).await.is_empty(), "nothing made on a refusal");
    let before = the_vm(k, vm).await;
    let (st, e) = s.raw(Method::POST, &path, Some(t), Some(json!({"snapshot": id, "stop": true}))).await;
    assert_eq!(st, 202, "{e}");

    // Halted first: the restore is made only once KubeVirt has no VMI left.
    let deadline = Instant::now() + Duration::from_secs(30);
    let restore = loop {
        if let Some(r) = objects_of(k, RESTORES, vm).await.into_iter().next() {
            break r;
        }
        assert!(Instant::now() < deadline, "no VirtualMachineRestore\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(objects_of(k, VMIS, vm).await.is_empty(), "restored under a running guest");
    assert_eq!(the_vm(k, vm).await["spec"]["runStrategy"], "Halted");
    assert_eq!(restore["metadata"]["namespace"], before["metadata"]["namespace"]);
    assert_eq!(restore["spec"]["target"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": before["metadata"]["name"]}));
    assert_eq!(restore["spec"]["virtualMachineSnapshotName"], snap["metadata"]["name"]);
    assert_eq!(restore["spec"]["volumeRestorePolicy"], "InPlace");
    let now = api_until(s, t, &format!("virtual_machines/{vm}"), "Restoring", |v| v.is_some()).await;
    assert_eq!(now["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING", "{now}");

    // KubeVirt's restore controller: the volumes are back, in place.
    let status = json!({"complete": true, "restoreTime": "2026-11-27T07:00:00Z",
        "restores": [{"volumeName": "rootdisk", "persistentVolumeClaim": before["spec"]["dataVolumeTemplates"][0]["metadata"]["name"],
            "volumeSnapshotName": "vmsnapshot-rootdisk"}]});
    let (st, b) = k.write_status(&restore, "virtualmachinerestores", status).await;
    assert!(st < 300, "{b}");
    let ready = api_until(s, t, &format!("virtual_machines/{vm}"), "READY again", |v| {
        v.is_some_and(|v| v["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY")
    })
    .await;
    assert!(ready["status"]["degraded"].is_null(), "{ready}");
    let after = the_vm(k, vm).await;
    assert_eq!(after["spec"]["runStrategy"], "Always");
    assert_eq!(after["metadata"]["annotations"]["vmaas.io/restore-generation"], "1");
    assert_eq!(after["spec"]["dataVolumeTemplates"], before["spec"]["dataVolumeTemplates"], "the volumes keep their names");
    assert_eq!(after["spec"]["template"]["spec"]["volumes"], before["spec"]["template"]["spec"]["volumes"]);
}
