//! The kubevirt backend against a real kube-apiserver (envtest style,
//! `vmaas_tests::k8s`), with a task playing KubeVirt and MetalLB
//! (`vmaas_tests::kubevirt`): VMs made through the vmaas API become
//! KubeVirt VMs in their tenant's namespace, accepted by the real API
//! server with strict field validation; their status follows what the
//! cluster reports; stop, start, restart, a deletion behind the server's
//! back and a server restart all end where they should; deleting leaves
//! nothing behind.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::k8s::{Cluster, KubeApi};
use vmaas_tests::kubevirt::Controllers;
use vmaas_tests::vms::{self, TINY, V1};
use vmaas_tests::{Db, Server};

const IMAGES: &str = "vmaas-images";

/// The catalog: DataSource `name` in the images namespace, ready.
async fn data_source(k: &KubeApi, name: &str) {
    let ds = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
        "metadata": {"name": name, "namespace": IMAGES},
        "spec": {"source": {"pvc": {"name": name, "namespace": IMAGES}}}});
    let (st, body) = k.apply(&ds, "datasources", "cdi").await;
    assert!(st < 300, "{st} {body}");
    let ready = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]});
    let (st, body) = k.write_status(&ds, "datasources", ready).await;
    assert_eq!(st, 200, "{body}");
}

/// The objects of `plural` (`/apis/GROUP/VERSION/PLURAL` or `/api/v1/PLURAL`) of vmaas object `id`.
async fn objects_of(k: &KubeApi, path: &str, id: &str) -> Vec<Value> {
    let (st, body) = k.request(Method::GET, &format!("{path}?labelSelector=vmaas.io/id%3D{id}"), None, None).await;
    assert_eq!(st, 200, "{body}");
    body["items"].as_array().cloned().unwrap_or_default()
}

const VMS: &str = "/apis/kubevirt.io/v1/virtualmachines";
const VMIS: &str = "/apis/kubevirt.io/v1/virtualmachineinstances";
const SERVICES: &str = "/api/v1/services";

async fn the_vm(k: &KubeApi, id: &str) -> Value {
    let found = objects_of(k, VMS, id).await;
    assert_eq!(found.len(), 1, "one KubeVirt VM for {id}: {found:#?}");
    found[0].clone()
}

async fn start(k: &Cluster) -> Server {
    let kubeconfig = k.kubeconfig();
    let args = ["--backend", "kubevirt", "--kubeconfig", kubeconfig.to_str().unwrap(), "--default-image", "test-guest"];
    let s = Server::start_with(Db::Sqlite, &args).await.expect("sqlite");
    vms::publish(&s, TINY);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_run_as_kubevirt_vms_in_their_tenants_namespaces() {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let mut s = start(&k).await;
    let (acme, globex) = (s.token("acme", false), s.token("globex", false));

    let id = vms::create(&s, &acme, "web", "tiny").await;
    let ready = vms::wait_ready(&s, &acme, &id).await;
    let vm = the_vm(&k, &id).await;
    let ns = vm["metadata"]["namespace"].as_str().unwrap().to_owned();
    assert!(ns.starts_with("vmaas-acme-"), "{ns}");
    assert_eq!(vm["metadata"]["name"], "web");
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    assert_eq!(vm["metadata"]["finalizers"], json!(["vmaas.io/cleanup"]));
    assert_eq!(vm["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"], json!({"kind": "DataSource", "name": "test-guest", "namespace": IMAGES}));
    let managers: Vec<&str> = vm["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    assert!(managers.contains(&"vmaas"), "applied as field manager vmaas: {managers:?}");
    let vmi = objects_of(&k, VMIS, &id).await;
    let address = vmi[0]["status"]["interfaces"][0]["ipAddress"].as_str().unwrap();
    assert_eq!(ready["status"]["internalIP"], address, "{ready:#}");
    let svc = objects_of(&k, SERVICES, &id).await;
    assert_eq!(svc.len(), 1, "tiny exposes a port: a floating-IP Service");
    assert_eq!(svc[0]["metadata"]["ownerReferences"][0]["uid"], vm["metadata"]["uid"], "owned by the VM");
    let floating = vms::wait_until(&s, &acme, &id, "the floating IP", 60, |v| v["status"]["externalIP"].as_str().is_some_and(|a| a.starts_with("192.0.2."))).await;
    assert_eq!(floating["status"]["externalIP"], svc[0]["status"]["loadBalancer"]["ingress"][0]["ip"]);

    // Another tenant's VM of the same name lives in its own namespace.
    let other = vms::create(&s, &globex, "web", "tiny").await;
    vms::wait_ready(&s, &globex, &other).await;
    let other_ns = the_vm(&k, &other).await["metadata"]["namespace"].as_str().unwrap().to_owned();
    assert!(other_ns.starts_with("vmaas-globex-") && other_ns != ns, "{other_ns}");
    assert_eq!(vms::get(&s, &globex, &id).await.0, 404, "tenants never see each other's VMs");

    // Stop, start, restart.
    let patch = |state: &str| json!({"object": {"spec": {"state": state}}});
    let path = format!("{V1}/virtual_machines/{id}");
    assert_eq!(s.raw(Method::PATCH, &path, Some(&acme), Some(patch("stopped"))).await.0, 200);
    vms::wait_until(&s, &acme, &id, "STOPPED", 60, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    assert_eq!(the_vm(&k, &id).await["spec"]["runStrategy"], "Halted");
    assert!(objects_of(&k, VMIS, &id).await.is_empty(), "no VMI while stopped");
    assert!(objects_of(&k, SERVICES, &id).await.is_empty(), "a stopped VM has no floating IP");
    assert_eq!(s.raw(Method::PATCH, &path, Some(&acme), Some(patch("started"))).await.0, 200);
    vms::wait_ready(&s, &acme, &id).await;
    let before = objects_of(&k, VMIS, &id).await[0]["metadata"]["uid"].clone();
    let (st, body) = s.raw(Method::POST, &format!("{path}/restart"), Some(&acme), None).await;
    assert!(st < 300, "{st} {body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = objects_of(&k, VMIS, &id).await;
        if now.first().is_some_and(|v| v["metadata"]["uid"] != before && v["status"]["phase"] == "Running") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the restart made no new VMI: {now:#?}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    vms::wait_ready(&s, &acme, &id).await;

    // A server restart adopts what is there: the same VM, not a second one.
    let uid = the_vm(&k, &id).await["metadata"]["uid"].clone();
    s.restart().await;
    vms::wait_ready(&s, &acme, &id).await;
    assert_eq!(the_vm(&k, &id).await["metadata"]["uid"], uid, "adopted, not made again");

    // Deleted in the cluster behind the server's back: made again.
    let (st, _) = k.request(Method::DELETE, &Cluster::path_of(&the_vm(&k, &id).await, "virtualmachines"), None, None).await;
    assert_eq!(st, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = objects_of(&k, VMS, &id).await;
        if now.len() == 1 && now[0]["metadata"]["uid"] != uid && now[0]["metadata"]["deletionTimestamp"].is_null() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the VM was not made again: {now:#?}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // Deleting leaves nothing behind.
    for (token, vm) in [(&acme, &id), (&globex, &other)] {
        let (st, body) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(token), None).await;
        assert!(st < 300, "{st} {body}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for (token, vm) in [(&acme, &id), (&globex, &other)] {
        while vms::get(&s, token, vm).await.0 != 404 {
            assert!(std::time::Instant::now() < deadline, "VM {vm} not deleted:\n{}", s.log());
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        for path in [VMS, VMIS, SERVICES] {
            assert_eq!(objects_of(&k, path, vm).await, Vec::<Value>::new(), "{path} of {vm} left behind");
        }
    }
}
