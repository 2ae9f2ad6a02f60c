//! Clones on the kubevirt backend against a real kube-apiserver with
//! KubeVirt's CRDs: a VM made with `clone_of` is first a
//! `VirtualMachineClone` of its source in the same namespace (nothing of
//! the VM is applied meanwhile); the test plays KubeVirt's clone
//! controller, which makes the clone's VM from the source's with new MACs
//! and restored claims and without vmaas's labels; vmaas then takes that VM
//! over with its own identity, keeping the claims as the disks, and it
//! runs. Deleting the clone deletes the
//! `VirtualMachineClone` too.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{VMS, api_until, env, objects_of, ready_snapshot, the_vm};
use vmaas_tests::vms::{self, V1};

const CLONES: &str = "/apis/clone.kubevirt.io/v1beta1/virtualmachineclones";

/// Waits for the `VirtualMachineClone` of VM `id`.
async fn clone_of(k: &Cluster, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(c) = objects_of(k, CLONES, id).await.into_iter().next() {
            return c;
        }
        assert!(Instant::now() < deadline, "no VirtualMachineClone of {id}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Drops vmaas's labels or annotations from `map`, as the clone's filters ask.
fn filtered(map: &Value) -> Value {
    let kept =
        map.as_object().map(|m| m.iter().filter(|(k, _)| !k.starts_with("vmaas.io/")).map(|(k, v)| (k.clone(), v.clone())).collect());
    Value::Object(kept.unwrap_or_default())
}

/// What KubeVirt's clone controller makes of `source` (a VM) for `clone`:
/// the target VM, its disks restored into new claims, new MACs, without
/// the labels and annotations the filters leave out; then the status.
async fn play_clone(k: &Cluster, clone: &Value, source: &Value) -> String {
    let (ns, target) = (clone["metadata"]["namespace"].clone(), clone["spec"]["target"]["name"].clone());
    let mut spec = source["spec"].clone();
    let restored = format!("restore-0b3c5e0e-{}", "rootdisk");
    spec["dataVolumeTemplates"][0]["metadata"]["name"] = json!(restored);
    for v in spec["template"]["spec"]["volumes"].as_array_mut().unwrap() {
        if v["name"] == "rootdisk" {
            v["dataVolume"]["name"] = json!(restored);
        }
    }
    for i in spec["template"]["spec"]["domain"]["devices"]["interfaces"].as_array_mut().unwrap() {
        i["macAddress"] = json!("02:4b:56:00:00:07");
    }
    spec["template"]["metadata"]["labels"] = filtered(&spec["template"]["metadata"]["labels"]);
    let vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": target, "namespace": ns, "labels": filtered(&source["metadata"]["labels"]),
            "annotations": filtered(&source["metadata"]["annotations"])},
        "spec": spec});
    let (st, b) = k.apply(&vm, "virtualmachines", "virt-controller").await;
    assert!(st < 300, "{b}");
    let (st, b) = k.write_status(clone, "virtualmachineclones", json!({"phase": "Succeeded", "targetName": target})).await;
    assert!(st < 300, "{b}");
    restored
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_is_a_virtual_machine_clone_whose_vm_vmaas_takes_over() {
    let (k, _kubevirt, s) = env().await;
    let t = s.token("acme", false);
    let src = vms::create(&s, &t, "web", "tiny").await;
    vms::wait_ready(&s, &t, &src).await;
    let source = the_vm(&k, &src).await;
    let ns = source["metadata"]["namespace"].clone();

    // A clone of the running VM: a VirtualMachineClone of it, and no VM applied meanwhile.
    let body = json!({"object": {"metadata": {"name": "copy"}, "spec": {"clone_of": {"compute_instance": "web"}}}});
    let (st, made) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{made}");
    let id = made["object"]["id"].as_str().unwrap().to_owned();
    let clone = clone_of(&k, &id).await;
    assert_eq!(clone["metadata"]["namespace"], ns);
    assert_eq!(clone["spec"]["source"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": source["metadata"]["name"]}));
    assert_eq!(clone["spec"]["target"]["kind"], "VirtualMachine");
    assert_eq!(clone["spec"]["labelFilters"], json!(["*", "!vmaas.io/*"]), "the source's vmaas labels stay behind: {clone}");
    let now = api_until(&s, &t, &format!("virtual_machines/{id}"), "cloning", |v| v.is_some()).await;
    assert_eq!(now["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING", "{now}");
    let target = clone["spec"]["target"]["name"].as_str().unwrap().to_owned();
    let (st, _) = k
        .request(Method::GET, &format!("/apis/kubevirt.io/v1/namespaces/{}/virtualmachines/{target}", ns.as_str().unwrap()), None, None)
        .await;
    assert_eq!(st, 404, "vmaas makes no VM before KubeVirt's clone does");

    // KubeVirt's clone controller makes the VM; vmaas takes it over and it runs.
    let restored = play_clone(&k, &clone, &source).await;
    let ready = api_until(&s, &t, &format!("virtual_machines/{id}"), "READY", |v| {
        v.is_some_and(|v| v["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY")
    })
    .await;
    assert!(ready["status"]["degraded"].is_null(), "no field left to another manager: {ready}");
    let vm = the_vm(&k, &id).await;
    assert_eq!(vm["metadata"]["name"], target.as_str());
    assert_eq!(vm["metadata"]["labels"]["vmaas.io/id"], id.as_str(), "its own identity: {vm}");
    let claims: Value = serde_json::from_str(vm["metadata"]["annotations"]["vmaas.io/disk-claims"].as_str().unwrap_or("{}")).unwrap();
    assert_eq!(claims["rootdisk"], restored.as_str(), "{vm}");
    assert_eq!(vm["spec"]["dataVolumeTemplates"][0]["metadata"]["name"], restored.as_str(), "the clone's claims are its disks");
    let root = vm["spec"]["template"]["spec"]["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "rootdisk").cloned().unwrap();
    assert_eq!(root["dataVolume"]["name"], restored.as_str());
    // Interfaces as vmaas renders every VM's: no MAC pinned (the list is
    // atomic, so the clone's new one goes with the take-over): KubeVirt gives each VMI its own.
    let interfaces = |v: &Value| v["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"].clone();
    assert_eq!(interfaces(&vm), interfaces(&source), "{vm}");
    assert!(interfaces(&vm)[0]["macAddress"].is_null(), "{vm}");
    assert_eq!(vm["spec"]["template"]["metadata"]["labels"]["vmaas.io/id"], id.as_str(), "its pods are its own: {vm}");
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    // The source is untouched.
    assert_eq!(the_vm(&k, &src).await["spec"]["dataVolumeTemplates"], source["spec"]["dataVolumeTemplates"]);

    // A clone of a snapshot: a VirtualMachineClone of its VirtualMachineSnapshot.
    let (_, vm_snapshot) = ready_snapshot(&k, &s, &t, "golden", "web").await;
    let body = json!({"object": {"metadata": {"name": "second"}, "spec": {"clone_of": {"snapshot": "golden"}}}});
    let (st, made) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{made}");
    let second = made["object"]["id"].as_str().unwrap().to_owned();
    let clone = clone_of(&k, &second).await;
    let want = json!({"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot", "name": vm_snapshot["metadata"]["name"]});
    assert_eq!(clone["spec"]["source"], want);
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{second}"), Some(&t), None).await;
    assert_eq!(st, 202);

    // Deleted: the VM and its VirtualMachineClone go.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    assert_eq!(st, 202);
    api_until(&s, &t, &format!("virtual_machines/{id}"), "gone", |v| v.is_none()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !objects_of(&k, CLONES, &id).await.is_empty() || !objects_of(&k, VMS, &id).await.is_empty() {
        assert!(Instant::now() < deadline, "the clone's objects stayed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
