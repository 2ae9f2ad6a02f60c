//! The cluster's controllers for the kubevirt backend's tests. MetalLB's
//! real controller runs ([`crate::metallb`], pools `public`, TEST-NET-1, and
//! `external-ips`): it gives LoadBalancer Services their addresses. No
//! KubeVirt, CDI or OVN-K runs beside the test API server, so a task does
//! what they would, from what it finds there. A VM whose run strategy is
//! `Always` gets a VMI (labelled from the VM's template, owned by the VM)
//! with an address on its first NIC, and both report running and ready; a
//! `Halted` one loses its VMI and reports stopped; a DataVolume is filled;
//! a UDN reports its network made, and a CUDN too, once the
//! NetworkAttachmentDefinitions OVN-K makes of it are there. The addresses
//! are data: nothing connects to them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::k8s::{Cluster, KubeApi};
use crate::vms::{self, TINY, V1};
use crate::{Db, Server};

/// How often the controllers look.
const PERIOD: Duration = Duration::from_millis(200);
/// The longest a test may play the cluster.
const LIFETIME: Duration = Duration::from_secs(900);

/// The playing task and MetalLB's controller; both stop when dropped.
pub struct Controllers {
    _metallb: crate::metallb::Metallb,
    paused: Arc<AtomicBool>,
    /// Held while a round acts.
    busy: Arc<tokio::sync::Mutex<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Controllers {
    /// Starts MetalLB's controller on `k`, and playing KubeVirt, CDI and OVN-K.
    pub async fn start(k: &Cluster) -> Self {
        let metallb = crate::metallb::Metallb::start(k, &crate::metallb::DEFAULT_POOLS).await;
        let api = k.api();
        let paused = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(tokio::sync::Mutex::new(()));
        let (p, b) = (paused.clone(), busy.clone());
        let task = tokio::spawn(async move {
            let end = Instant::now() + LIFETIME;
            while Instant::now() < end {
                let _acting = b.lock().await;
                if !p.load(Ordering::Relaxed) {
                    round(&api).await;
                }
                drop(_acting);
                tokio::time::sleep(PERIOD).await;
            }
        });
        Self { _metallb: metallb, paused, busy, task }
    }

    /// Stops (or resumes) acting, e.g. to see the backend wait for KubeVirt.
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// Stops acting once the round under way is over (before the API
    /// server goes away, say).
    pub async fn halt(&self) {
        self.pause(true);
        drop(self.busy.lock().await);
    }
}

async fn list(api: &KubeApi, path: &str) -> Vec<Value> {
    let (st, body) = api.request(Method::GET, path, None, None).await;
    if st != 200 {
        return Vec::new();
    }
    body["items"].as_array().cloned().unwrap_or_default()
}

/// One look at everything, acting on what needs it.
async fn round(api: &KubeApi) {
    let vmis = list(api, "/apis/kubevirt.io/v1/virtualmachineinstances").await;
    let udns = list(api, "/apis/k8s.ovn.org/v1/userdefinednetworks").await;
    for (i, vm) in list(api, "/apis/kubevirt.io/v1/virtualmachines").await.iter().enumerate() {
        let same = |v: &&Value| v["metadata"]["namespace"] == vm["metadata"]["namespace"];
        let vmi = vmis.iter().filter(same).find(|v| v["metadata"]["name"] == vm["metadata"]["name"]);
        // OVN-K's IPAM: the address asked for on the primary UDN (KubeVirt's
        // IPAM extension passes it on), else one of its range, else of the pod network.
        let udn = udns.iter().filter(same).find_map(|u| u["spec"]["layer2"]["subnets"][0].as_str());
        let asked = udn.and_then(|_| asked_address(vm));
        let address = match (asked, udn.and_then(|c| c.split('/').next()).and_then(|a| a.parse::<std::net::Ipv4Addr>().ok())) {
            (Some(a), _) => a,
            (None, Some(net)) => std::net::Ipv4Addr::from(u32::from(net) + 100 + i as u32).to_string(),
            (None, None) => format!("10.244.{}.{}", i / 200, 10 + i % 200),
        };
        play_vm(api, vm, vmi, &address).await;
    }
    let dvs = list(api, "/apis/cdi.kubevirt.io/v1beta1/datavolumes").await;
    for dv in &dvs {
        cdi(api, dv).await;
    }
    for ds in list(api, "/apis/cdi.kubevirt.io/v1beta1/datasources").await {
        cdi_source(api, &ds, &dvs).await;
    }
    for udn in list(api, "/apis/k8s.ovn.org/v1/userdefinednetworks").await {
        ovn_k(api, &udn).await;
    }
    for cudn in list(api, "/apis/k8s.ovn.org/v1/clusteruserdefinednetworks").await {
        ovn_k_cluster(api, &cudn).await;
    }
    for eip in list(api, "/apis/k8s.ovn.org/v1/egressips").await {
        ovn_k_egress(api, &eip).await;
    }
}

/// What OVN-Kubernetes does for one EgressIP: it gives its addresses to
/// `node-1` (an egress-assignable node). The CRD has no status subresource,
/// so the status is written with the object, as OVN-K does.
async fn ovn_k_egress(api: &KubeApi, eip: &Value) {
    if eip["status"]["items"].as_array().is_some_and(|i| !i.is_empty()) || !eip["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let items: Vec<Value> =
        eip["spec"]["egressIPs"].as_array().into_iter().flatten().map(|a| json!({"egressIP": a, "node": "node-1"})).collect();
    let path = format!("{}?fieldValidation=Strict", KubeApi::path_of(eip, "egressips"));
    api.request(Method::PATCH, &path, Some(&json!({"status": {"items": items}})), Some("application/merge-patch+json")).await;
}

/// What OVN-Kubernetes does for one CUDN: a NetworkAttachmentDefinition of
/// its name in each namespace its selector's `In` expression names by
/// `vmaas.io/tenant`, then the network reported made.
async fn ovn_k_cluster(api: &KubeApi, cudn: &Value) {
    if cudn["status"]["conditions"].as_array().is_some_and(|c| !c.is_empty()) || !cudn["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let tenants = &cudn["spec"]["namespaceSelector"]["matchExpressions"][0]["values"];
    let name = cudn["metadata"]["name"].as_str().unwrap_or_default();
    for ns in list(api, "/api/v1/namespaces").await {
        let label = &ns["metadata"]["labels"]["vmaas.io/tenant"];
        if !tenants.as_array().is_some_and(|t| t.contains(label)) {
            continue;
        }
        let config = json!({"cniVersion": "1.0.0", "type": "ovn-k8s-cni-overlay", "name": name, "topology": "layer2",
            "netAttachDefName": format!("{}/{name}", ns["metadata"]["name"].as_str().unwrap_or_default())});
        let nad = json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": ns["metadata"]["name"]}, "spec": {"config": config.to_string()}});
        api.apply(&nad, "network-attachment-definitions", "ovnkube-controller").await;
    }
    let made = json!({"type": "NetworkCreated", "status": "True", "reason": "NetworkAttachmentDefinitionCreated",
        "message": "NetworkAttachmentDefinition has been created", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    api.write_status(cudn, "clusteruserdefinednetworks", json!({"conditions": [made]})).await;
}

/// The address a VM asks OVN-K for on its first NIC
/// (`network.kubevirt.io/addresses`, `{"default": ["10.0.0.5/24"]}`), without its prefix.
fn asked_address(vm: &Value) -> Option<String> {
    let asked = vm["spec"]["template"]["metadata"]["annotations"]["network.kubevirt.io/addresses"].as_str()?;
    let asked: Value = serde_json::from_str(asked).ok()?;
    asked["default"][0].as_str()?.split('/').next().map(str::to_owned)
}

/// What KubeVirt does for one VM (`vmi`: its VMI, if it has one): a VM
/// that should run gets a running, ready VMI with `address`; one that
/// should not loses its VMI. The VM's own status is written last.
pub async fn play_vm(api: &KubeApi, vm: &Value, vmi: Option<&Value>, address: &str) {
    if !vm["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let run = vm["spec"]["runStrategy"] == "Always";
    match (run, vmi) {
        // Multus cannot start the launcher pod until each network it names exists.
        (true, None) if !networks_exist(api, vm).await => {}
        (true, None) => {
            let meta = &vm["metadata"];
            let vmi = json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                    "labels": vm["spec"]["template"]["metadata"]["labels"],
                    "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": meta["name"], "uid": meta["uid"], "controller": true}]},
                "spec": vm["spec"]["template"]["spec"],
            });
            let (st, _) = api.apply(&vmi, "virtualmachineinstances", "virt-controller").await;
            if st < 300 {
                let ready = json!({"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": null});
                let status = json!({"phase": "Running", "nodeName": "node-1", "conditions": [ready, live_migratable(&vm["spec"]["template"]["spec"])],
                    "interfaces": [{"name": "default", "ipAddress": address}]});
                api.write_status(&vmi, "virtualmachineinstances", status).await;
                api.write_status(vm, "virtualmachines", json!({"printableStatus": "Running", "ready": true, "created": true})).await;
            }
        }
        (false, Some(vmi)) => {
            api.request(Method::DELETE, &KubeApi::path_of(vmi, "virtualmachineinstances"), None, None).await;
            api.write_status(vm, "virtualmachines", json!({"printableStatus": "Stopped", "ready": false, "created": false})).await;
        }
        (false, None) if vm["status"]["printableStatus"] != "Stopped" => {
            api.write_status(vm, "virtualmachines", json!({"printableStatus": "Stopped", "ready": false, "created": false})).await;
        }
        _ => {}
    }
}

/// Whether every Multus network (`namespace/name`) VM `vm` names has its
/// NetworkAttachmentDefinition.
async fn networks_exist(api: &KubeApi, vm: &Value) -> bool {
    let networks = vm["spec"]["template"]["spec"]["networks"].as_array().cloned().unwrap_or_default();
    for n in networks.iter().filter_map(|n| n["multus"]["networkName"].as_str()) {
        let Some((ns, name)) = n.split_once('/') else { continue };
        let path = format!("/apis/k8s.cni.cncf.io/v1/namespaces/{ns}/network-attachment-definitions/{name}");
        if api.request(Method::GET, &path, None, None).await.0 != 200 {
            return false;
        }
    }
    true
}

/// KubeVirt's `LiveMigratable` condition of a VMI of `spec`, by the one
/// rule played here: host devices (GPUs) never move.
fn live_migratable(spec: &Value) -> Value {
    let devices = spec["domain"]["devices"]["hostDevices"].as_array().map_or(0, Vec::len);
    if devices == 0 {
        return json!({"type": "LiveMigratable", "status": "True", "lastProbeTime": null, "lastTransitionTime": null});
    }
    json!({"type": "LiveMigratable", "status": "False", "reason": "HostDeviceNotLiveMigratable",
        "message": "VMI uses a host device, which cannot be live-migrated", "lastProbeTime": null, "lastTransitionTime": null})
}

/// What CDI does for one DataVolume: it fills it.
async fn cdi(api: &KubeApi, dv: &Value) {
    if dv["status"]["phase"].is_string() || !dv["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    // An upload waits for its file (`crate::cdi_upload` fills it); anything else is filled at once.
    let status = if dv["spec"]["source"]["upload"].is_object() {
        json!({"phase": "UploadReady", "progress": "N/A"})
    } else {
        json!({"phase": "Succeeded", "progress": "100.0%"})
    };
    api.write_status(dv, "datavolumes", status).await;
}

/// What CDI does for one DataSource over a PVC: ready once the
/// DataVolume of that name is filled.
async fn cdi_source(api: &KubeApi, ds: &Value, dvs: &[Value]) {
    let pvc = &ds["spec"]["source"]["pvc"];
    let ready = ds["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    let filled = dvs.iter().any(|d| {
        d["metadata"]["name"] == pvc["name"] && d["metadata"]["namespace"] == pvc["namespace"] && d["status"]["phase"] == "Succeeded"
    });
    if ready || !filled {
        return;
    }
    let condition = json!({"type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime": "2026-01-01T00:00:00Z"});
    api.write_status(ds, "datasources", json!({"conditions": [condition]})).await;
}

/// What OVN-Kubernetes does for one UDN: it makes the network.
async fn ovn_k(api: &KubeApi, udn: &Value) {
    if udn["status"]["conditions"].as_array().is_some_and(|c| !c.is_empty()) || !udn["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let made = json!({"type": "NetworkCreated", "status": "True", "reason": "NetworkAttachmentDefinitionCreated",
        "message": "NetworkAttachmentDefinition has been created", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    api.write_status(udn, "userdefinednetworks", json!({"conditions": [made]})).await;
}

// ---- helpers of the kubevirt tests ----

/// The images namespace the tests' servers use.
pub const IMAGES: &str = "vmaas-images";

/// The catalog: DataSource `name` in the images namespace, ready.
pub async fn data_source(k: &KubeApi, name: &str) {
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
pub async fn objects_of(k: &KubeApi, path: &str, id: &str) -> Vec<Value> {
    let (st, body) = k.request(Method::GET, &format!("{path}?labelSelector=vmaas.io/id%3D{id}"), None, None).await;
    assert_eq!(st, 200, "{body}");
    body["items"].as_array().cloned().unwrap_or_default()
}

/// A template whose `vm_image` parameter picks the image.
pub const PICK: &str =
    "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n";

/// KubeVirt VMs, cluster-wide.
pub const VMS: &str = "/apis/kubevirt.io/v1/virtualmachines";
/// KubeVirt VMIs, cluster-wide.
pub const VMIS: &str = "/apis/kubevirt.io/v1/virtualmachineinstances";
/// Services, cluster-wide.
pub const SERVICES: &str = "/api/v1/services";

/// The one KubeVirt VM of vmaas VM `id`.
pub async fn the_vm(k: &KubeApi, id: &str) -> Value {
    let found = objects_of(k, VMS, id).await;
    let all = k.request(Method::GET, VMS, None, None).await.1;
    assert_eq!(found.len(), 1, "one KubeVirt VM for {id}: {found:#?}\nall: {all:#}");
    found[0].clone()
}

/// A `vmaas-server --backend kubevirt` on `k`, with the `tiny` template.
pub async fn start(k: &Cluster) -> Server {
    start_with(k, &[]).await
}

/// [`start`] with `extra` arguments.
pub async fn start_with(k: &Cluster, extra: &[&str]) -> Server {
    let kubeconfig = crate::chart::server_kubeconfig(k).await;
    let mut args = vec!["--backend", "kubevirt", "--kubeconfig", kubeconfig.to_str().unwrap(), "--default-image", "test-guest"];
    args.extend(extra);
    let s = Server::start_with(Db::Sqlite, &args).await.expect("sqlite");
    vms::publish(&s, TINY);
    s
}

/// POSTs `body` to `path` (under the API) as `token`, which must make it: its id.
pub async fn made(s: &Server, token: &str, path: &str, body: Value) -> String {
    let path = format!("{V1}/{path}");
    let (st, b) = s.raw(Method::POST, &path, Some(token), Some(body)).await;
    assert_eq!(st, 201, "{path}: {b}");
    b["object"]["id"].as_str().unwrap_or_default().to_owned()
}

/// Waits until `path` (under the API) satisfies `pred` (`None`: it is gone).
pub async fn api_until(s: &Server, t: &str, path: &str, what: &str, pred: impl Fn(Option<&Value>) -> bool) -> Value {
    crate::vms::wait_object(s, t, &format!("{V1}/{path}"), what, 30, pred).await
}

/// A cluster with the catalog's `test-guest` DataSource and its controllers
/// played, and a kubevirt server on it (drop order: server, controllers, cluster).
pub async fn env() -> (Cluster, Controllers, Server) {
    env_on(Cluster::start().await).await
}

/// [`env`] on cluster `k` (an aggregated one, say).
pub async fn env_on(k: Cluster) -> (Cluster, Controllers, Server) {
    env_with(k, &[]).await
}

/// [`env_on`] with `extra` arguments for the server.
pub async fn env_with(k: Cluster, extra: &[&str]) -> (Cluster, Controllers, Server) {
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let kubevirt = Controllers::start(&k).await;
    let s = start_with(&k, extra).await;
    (k, kubevirt, s)
}

/// Node `name` of the cluster, Ready, with `cpu` and `memory` allocatable
/// (and `extra` resources, e.g. GPUs), as the kubelet would report it.
pub async fn node(k: &KubeApi, name: &str, cpu: &str, memory: &str, extra: Value) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    let (st, body) = k.apply(&node, "nodes", "kubelet").await;
    assert!(st < 300, "{st} {body}");
    let mut allocatable = json!({"cpu": cpu, "memory": memory, "pods": "110"});
    if let (Some(a), Some(e)) = (allocatable.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let (st, body) =
        k.write_status(&node, "nodes", json!({"capacity": allocatable, "allocatable": allocatable, "conditions": [ready]})).await;
    assert_eq!(st, 200, "{body}");
}

/// VirtualMachineSnapshots, cluster-wide.
pub const VM_SNAPSHOTS: &str = "/apis/snapshot.kubevirt.io/v1beta1/virtualmachinesnapshots";

/// Takes snapshot `name` of VM `vm` (a name) and plays KubeVirt's snapshot
/// controller for it (taken offline, `rootdisk` in it), until it is READY:
/// the snapshot's id and its `VirtualMachineSnapshot`.
pub async fn ready_snapshot(k: &KubeApi, s: &Server, t: &str, name: &str, vm: &str) -> (String, Value) {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"compute_instance": vm}}});
    let (st, snap) = s.raw(Method::POST, &format!("{V1}/compute_instance_snapshots"), Some(t), Some(body)).await;
    assert_eq!(st, 201, "{snap}");
    let id = snap["object"]["id"].as_str().unwrap_or_default().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    let made = loop {
        if let Some(o) = objects_of(k, VM_SNAPSHOTS, &id).await.into_iter().next() {
            break o;
        }
        assert!(Instant::now() < deadline, "no VirtualMachineSnapshot of {id}");
        tokio::time::sleep(PERIOD).await;
    };
    let status = json!({"phase": "Succeeded", "readyToUse": true, "creationTime": "2026-11-27T08:00:00Z",
        "indications": [], "snapshotVolumes": {"includedVolumes": ["rootdisk"]}});
    let (st, b) = k.write_status(&made, "virtualmachinesnapshots", status).await;
    assert!(st < 300, "{b}");
    api_until(s, t, &format!("compute_instance_snapshots/{id}"), "READY", |v| {
        v.is_some_and(|v| v["status"]["state"] == "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY")
    })
    .await;
    (id, made)
}
