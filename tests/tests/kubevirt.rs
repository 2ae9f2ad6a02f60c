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
    let all = k.request(Method::GET, VMS, None, None).await.1;
    assert_eq!(found.len(), 1, "one KubeVirt VM for {id}: {found:#?}\nall: {all:#}");
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
    assert_eq!(
        vm["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"],
        json!({"kind": "DataSource", "name": "test-guest", "namespace": IMAGES})
    );
    let managers: Vec<&str> = vm["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    assert!(managers.contains(&"vmaas"), "applied as field manager vmaas: {managers:?}");
    let vmi = objects_of(&k, VMIS, &id).await;
    let address = vmi[0]["status"]["interfaces"][0]["ipAddress"].as_str().unwrap();
    assert_eq!(ready["status"]["internalIP"], address, "{ready:#}");
    let svc = objects_of(&k, SERVICES, &id).await;
    assert_eq!(svc.len(), 1, "tiny exposes a port: a floating-IP Service");
    assert_eq!(svc[0]["metadata"]["ownerReferences"][0]["uid"], vm["metadata"]["uid"], "owned by the VM");
    let floating = vms::wait_until(&s, &acme, &id, "the floating IP", 60, |v| {
        v["status"]["externalIP"].as_str().is_some_and(|a| a.starts_with("192.0.2."))
    })
    .await;
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

/// Waits for the migration of `id` named `name`, as the backend made it.
async fn the_migration(k: &KubeApi, id: &str, name: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = objects_of(k, "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", id).await;
        if let Some(m) = found.iter().find(|m| m["metadata"]["name"] == name) {
            return m.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no migration {name}: {found:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn condition<'a>(vm: &'a Value, kind: &str) -> &'a Value {
    let all = vm["status"]["conditions"].as_array().expect("conditions");
    all.iter().find(|c| c["type"] == format!("VIRTUAL_MACHINE_CONDITION_TYPE_{kind}")).unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_live_migrates_a_vm() {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let s = start(&k).await;
    let (acme, admin) = (s.token("acme", false), s.token("ops", true));
    let id = vms::create(&s, &acme, "db", "tiny").await;
    vms::wait_ready(&s, &acme, &id).await;
    let migrate = format!("{V1}/virtual_machines/{id}/migrate");

    let (st, body) = s.raw(Method::POST, &migrate, Some(&acme), None).await;
    assert_eq!(st, 403, "tenants do not migrate: {body}");
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), Some(json!({"target_node": "Node_2"}))).await;
    assert_eq!((st, body["details"][0]["field"].as_str()), (400, Some("target_node")), "{body}");
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), Some(json!({"target": "node-2"}))).await;
    assert_eq!(st, 400, "unknown fields are refused: {body}");
    assert!(
        objects_of(&k, "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", &id).await.is_empty(),
        "a refused request made nothing"
    );

    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), Some(json!({"target_node": "node-2"}))).await;
    assert_eq!(st, 202, "{body}");
    let m = the_migration(&k, &id, "db-migration-1").await;
    assert_eq!(m["spec"], json!({"vmiName": "db", "addedNodeSelector": {"kubernetes.io/hostname": "node-2"}}));
    let moving = vms::wait_until(&s, &admin, &id, "MIGRATING", 30, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_MIGRATING").await;
    assert!(condition(&moving, "PROGRESSING")["message"].as_str().unwrap().contains("to node node-2"), "{moving:#}");
    // Play KubeVirt: the migration runs, then succeeds with the VMI on node-2.
    let (st, body) = k.write_status(&m, "virtualmachineinstancemigrations", json!({"phase": "Running"})).await;
    assert_eq!(st, 200, "{body}");
    vms::wait_until(&s, &admin, &id, "still MIGRATING", 10, |v| {
        condition(v, "PROGRESSING")["message"].as_str().is_some_and(|m| m.ends_with("Running"))
    })
    .await;
    let vmi = objects_of(&k, VMIS, &id).await.remove(0);
    k.write_status(&m, "virtualmachineinstancemigrations", json!({"phase": "Succeeded"})).await;
    k.write_status(&vmi, "virtualmachineinstances", json!({"nodeName": "node-2"})).await;
    vms::wait_ready(&s, &acme, &id).await;

    // A second migration (through the CLI) that fails: READY, and DEGRADED saying why.
    let out = s.cli(&admin, &["vm", "migrate", &id, "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).expect("the VM as JSON");
    assert_eq!(vms::state(&shown), "VIRTUAL_MACHINE_STATE_MIGRATING", "{shown:#}");
    let m = the_migration(&k, &id, "db-migration-2").await;
    assert!(m["spec"].get("addedNodeSelector").is_none(), "no node asked: the scheduler's choice");
    let failed = json!({"phase": "Failed", "migrationState": {"failed": true, "failureReason": "target node has no room"}});
    let (st, body) = k.write_status(&m, "virtualmachineinstancemigrations", failed).await;
    assert_eq!(st, 200, "{body}");
    let degraded =
        vms::wait_until(&s, &admin, &id, "DEGRADED", 30, |v| condition(v, "DEGRADED")["status"] == "CONDITION_STATUS_TRUE").await;
    assert_eq!(vms::state(&degraded), "VIRTUAL_MACHINE_STATE_READY", "the guest stays where it was");
    assert!(condition(&degraded, "DEGRADED")["message"].as_str().unwrap().contains("target node has no room"), "{degraded:#}");

    // Stopped VMs do not migrate; a backend that cannot migrate says so.
    assert_eq!(
        s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&acme), Some(json!({"object": {"spec": {"state": "stopped"}}})))
            .await
            .0,
        200
    );
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), None).await;
    assert!(st == 409 && body["message"].as_str().unwrap().contains("stopped"), "{st} {body}");
    let none = Server::start(Db::Sqlite).await.expect("sqlite");
    vms::publish(&none, TINY);
    let vm = vms::create(&none, &none.token("acme", false), "db", "tiny").await;
    let (st, body) = none.raw(Method::POST, &format!("{V1}/virtual_machines/{vm}/migrate"), Some(&none.token("ops", true)), None).await;
    assert!(st == 409 && body["message"].as_str().unwrap().contains("none backend cannot live-migrate"), "{st} {body}");
}

/// The id of the one VM `token` sees.
async fn the_only_vm(s: &Server, token: &str) -> String {
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(token), None).await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one VM: {list:#}");
    items[0]["id"].as_str().unwrap().to_owned()
}

/// The quickstart applies against the kubevirt backend with both Terraform
/// versions: apply waits for READY (KubeVirt's ready VM), the external IP is
/// the floating-IP Service's, a re-plan is empty, and destroy leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terraform_quickstart_applies_on_kubevirt() {
    use vmaas_tests::tf::{Tf, Workspace, repo};
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let s = start(&k).await;
    let token = s.token("ci", false);
    let quickstart = std::fs::read_to_string(repo().join("examples/terraform/quickstart/main.tf")).unwrap();
    for tf in [Tf::V1_0_3, Tf::V1_15_5] {
        let w = Workspace::new(tf, &s, &token, &quickstart);
        w.apply(&[]);
        assert_eq!(w.output("status"), "READY", "{tf:?}");
        let id = the_only_vm(&s, &token).await;
        let svc = objects_of(&k, SERVICES, &id).await;
        assert_eq!(w.output("external_ip"), svc[0]["status"]["loadBalancer"]["ingress"][0]["ip"].as_str().unwrap(), "{tf:?}");
        let vm = the_vm(&k, &id).await;
        assert_eq!(vm["spec"]["template"]["spec"]["domain"]["memory"]["guest"], "256Mi");
        let (code, text) = w.plan_code(&[]);
        assert_eq!(code, 0, "{tf:?}: a no-op re-plan:\n{text}");
        w.apply(&["-var", "memory=512Mi"]);
        let id = the_only_vm(&s, &token).await;
        assert_eq!(the_vm(&k, &id).await["spec"]["template"]["spec"]["domain"]["memory"]["guest"], "512Mi", "{tf:?}");
        w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "memory=512Mi"]);
        for path in [VMS, VMIS, SERVICES] {
            assert_eq!(objects_of(&k, path, &id).await, Vec::<Value>::new(), "{tf:?}: {path} left behind");
        }
    }
}

/// A subnet is a namespace with a primary layer-2 UDN; a VM on it runs
/// there, bridged onto it; its security groups are a NetworkPolicy that
/// follows their rules without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_is_a_primary_udn_and_security_groups_are_network_policies() {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let s = start(&k).await;
    let acme = s.token("acme", false);
    let post = |path: &str, body: Value| {
        let (s, acme, path) = (&s, acme.clone(), format!("{V1}/{path}"));
        async move {
            let (st, b) = s.raw(Method::POST, &path, Some(&acme), Some(body)).await;
            assert_eq!(st, 201, "{path}: {b}");
            b["object"]["id"].as_str().unwrap().to_owned()
        }
    };
    post("virtual_networks", json!({"object": {"metadata": {"name": "app"}, "spec": {"ipv4_cidr": "10.60.0.0/16"}}})).await;
    let subnet = post(
        "subnets",
        json!({"object": {"metadata": {"name": "front"}, "spec": {"virtual_network": "app", "ipv4_cidr": "10.60.1.0/24"}}}),
    )
    .await;
    let sg = post(
        "security_groups",
        json!({"object": {"metadata": {"name": "web"}, "spec": {"virtual_network": "app",
        "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 80}], "egress": [{"protocol": "PROTOCOL_ALL"}]}}}),
    )
    .await;
    let vm = post(
        "virtual_machines",
        json!({"object": {"metadata": {"name": "web"}, "spec": {"template": "tiny",
        "network_attachments": [{"subnet": "front", "security_groups": ["web"]}]}}}),
    )
    .await;
    let ready = vms::wait_ready(&s, &acme, &vm).await;

    let udns = objects_of(&k, "/apis/k8s.ovn.org/v1/userdefinednetworks", &subnet).await;
    assert_eq!(udns.len(), 1, "{udns:#?}");
    let ns = udns[0]["metadata"]["namespace"].as_str().unwrap().to_owned();
    assert_eq!(udns[0]["spec"]["layer2"], json!({"role": "Primary", "subnets": ["10.60.1.0/24"], "ipam": {"lifecycle": "Persistent"}}));
    let (_, namespace) = k.request(Method::GET, &format!("/api/v1/namespaces/{ns}"), None, None).await;
    assert!(namespace["metadata"]["labels"].get("k8s.ovn.org/primary-user-defined-network").is_some(), "{namespace:#}");
    let (_, sub) = s.raw(Method::GET, &format!("{V1}/subnets/{subnet}"), Some(&acme), None).await;
    assert_eq!(sub["object"]["status"]["state"], "SUBNET_STATE_READY", "{sub:#}");

    let kv = the_vm(&k, &vm).await;
    assert_eq!(kv["metadata"]["namespace"], ns.as_str(), "the VM runs in its subnet's namespace");
    assert_eq!(
        kv["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0],
        json!({"name": "default", "binding": {"name": "l2bridge"}})
    );
    assert_eq!(ready["status"]["internalIPs"][0], ready["status"]["internalIP"], "{ready:#}");

    let policy = objects_of(&k, "/apis/networking.k8s.io/v1/networkpolicies", &vm).await;
    assert_eq!(policy.len(), 1, "{policy:#?}");
    assert_eq!(policy[0]["spec"]["podSelector"], json!({"matchLabels": {"vmaas.io/id": vm}}));
    assert_eq!(
        policy[0]["spec"]["ingress"],
        json!([{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 80}]}])
    );
    assert_eq!(policy[0]["spec"]["egress"], json!([{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]));

    // A new rule reaches the policy without a restart.
    let patch = json!({"object": {"spec": {"ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 80}, {"protocol": "PROTOCOL_TCP", "port_from": 8000, "port_to": 8080, "ipv4_cidr": "10.60.1.0/24"}]}}});
    let (st, body) = s.raw(Method::PATCH, &format!("{V1}/security_groups/{sg}"), Some(&acme), Some(patch)).await;
    assert_eq!(st, 200, "{body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let p = objects_of(&k, "/apis/networking.k8s.io/v1/networkpolicies", &vm).await;
        if p[0]["spec"]["ingress"].as_array().is_some_and(|i| i.len() == 2) {
            assert_eq!(p[0]["spec"]["ingress"][1]["ports"], json!([{"protocol": "TCP", "port": 8000, "endPort": 8080}]));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the policy kept its old rules: {p:#?}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(vms::state(&vms::get(&s, &acme, &vm).await.1["object"]), "VIRTUAL_MACHINE_STATE_READY", "no restart");

    // Deleting the VM removes its policy; then the subnet goes with its UDN.
    for (path, id) in [("virtual_machines", &vm), ("subnets", &subnet)] {
        let url = format!("{V1}/{path}/{id}");
        assert!(s.raw(Method::DELETE, &url, Some(&acme), None).await.0 < 300);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while s.raw(Method::GET, &url, Some(&acme), None).await.0 != 404 {
            assert!(std::time::Instant::now() < deadline, "{url} not deleted:\n{}", s.log());
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    for (path, id) in
        [("/apis/networking.k8s.io/v1/networkpolicies", &vm), (VMS, &vm), ("/apis/k8s.ovn.org/v1/userdefinednetworks", &subnet)]
    {
        assert_eq!(objects_of(&k, path, id).await, Vec::<Value>::new(), "{path} left behind");
    }
    let (_, namespace) = k.request(Method::GET, &format!("/api/v1/namespaces/{ns}"), None, None).await;
    assert!(namespace["metadata"]["deletionTimestamp"].is_string(), "the subnet's namespace is being deleted: {namespace:#}");
}

/// The two-tier example applies on kubevirt with both Terraform versions:
/// a subnet (a primary UDN), two web VMs and a backend with their security
/// groups (NetworkPolicies), and a load balancer whose EndpointSlice lists
/// the ready web VMs and drops one that stops; destroy leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terraform_two_tier_example_applies_on_kubevirt() {
    use vmaas_tests::tf::{Tf, Workspace, repo};
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let s = start(&k).await;
    let token = s.token("ci", false);
    let main_tf = std::fs::read_to_string(repo().join("examples/terraform/two-tier/main.tf")).unwrap();
    for tf in [Tf::V1_0_3, Tf::V1_15_5] {
        let w = Workspace::new(tf, &s, &token, &main_tf);
        let text = w.apply(&[]);
        assert!(text.contains("Apply complete! Resources: 8 added"), "{tf:?}: {text}");
        let backend_ip = w.output("backend_ip");
        assert!(backend_ip.starts_with("10.60.1."), "{tf:?}: the backend's address on the subnet: {backend_ip}");
        let (_, lbs) = s.raw(Method::GET, &format!("{V1}/load_balancers"), Some(&token), None).await;
        let lb = lbs["items"][0].clone();
        let lb_id = lb["id"].as_str().unwrap().to_owned();
        let svc = objects_of(&k, SERVICES, &lb_id).await;
        assert_eq!(svc.len(), 1, "{tf:?}: {svc:#?}");
        assert!(svc[0]["spec"].get("selector").is_none(), "{tf:?}: endpoints come from the EndpointSlice");
        assert_eq!(svc[0]["status"]["loadBalancer"]["ingress"][0]["ip"], w.output("load_balancer").as_str(), "{tf:?}");
        let slices = "/apis/discovery.k8s.io/v1/endpointslices";
        let endpoints = |k: &KubeApi, id: String| {
            let k = k.clone();
            async move { objects_of(&k, slices, &id).await[0]["endpoints"].as_array().map_or(0, Vec::len) }
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while endpoints(&k, lb_id.clone()).await != 2 {
            assert!(std::time::Instant::now() < deadline, "{tf:?}: both web VMs serve\n{}", s.log());
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let policies = k
            .request(
                Method::GET,
                "/apis/networking.k8s.io/v1/networkpolicies?labelSelector=app.kubernetes.io/managed-by%3Dvmaas",
                None,
                None,
            )
            .await
            .1;
        assert_eq!(policies["items"].as_array().map(Vec::len), Some(3), "{tf:?}: one per VM NIC: {policies:#}");
        assert_eq!(w.plan_code(&[]).0, 0, "{tf:?}: no drift after apply");

        // A stopped web VM leaves the load balancer.
        let (_, web1) =
            s.raw(Method::GET, &format!("{V1}/virtual_machines?filter=this.metadata.name%3D%3D'two-tier-web-1'"), Some(&token), None).await;
        let web1 = web1["items"][0]["id"].as_str().unwrap().to_owned();
        let stop = json!({"object": {"spec": {"state": "stopped"}}});
        assert_eq!(s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{web1}"), Some(&token), Some(stop)).await.0, 200);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (_, now) = s.raw(Method::GET, &format!("{V1}/load_balancers/{lb_id}"), Some(&token), None).await;
            if now["object"]["status"]["healthy_targets"].as_array().map(Vec::len) == Some(1) && endpoints(&k, lb_id.clone()).await == 1 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{tf:?}: the stopped VM still serves: {now:#}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        w.ok(&["destroy", "-auto-approve", "-no-color"]);
        for kind in ["virtual_machines", "load_balancers", "subnets", "security_groups", "virtual_networks"] {
            let (_, list) = s.raw(Method::GET, &format!("{V1}/{kind}"), Some(&token), None).await;
            assert_eq!(list["total"], 0, "{tf:?}: {kind}: {list}");
        }
        let left = k.request(Method::GET, &format!("{SERVICES}?labelSelector=app.kubernetes.io/managed-by%3Dvmaas"), None, None).await.1;
        assert_eq!(left["items"], json!([]), "{tf:?}: Services left behind");
        for path in [VMS, VMIS, "/apis/k8s.ovn.org/v1/userdefinednetworks", slices, "/apis/networking.k8s.io/v1/networkpolicies"] {
            let left = k.request(Method::GET, &format!("{path}?labelSelector=app.kubernetes.io/managed-by%3Dvmaas"), None, None).await.1;
            assert_eq!(left["items"], json!([]), "{tf:?}: {path} left behind");
        }
    }
}

/// Waits until `path` (under the API) satisfies `pred` (`None`: it is gone).
async fn api_until(s: &Server, t: &str, path: &str, what: &str, pred: impl Fn(Option<&Value>) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (st, v) = s.raw(Method::GET, &format!("{V1}/{path}"), Some(t), None).await;
        if pred((st == 200).then_some(&v["object"])) {
            return v["object"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}: {st} {v:#}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A volume is a DataVolume in its VM's namespace, hotplugged as a SCSI
/// disk with its serial and taken off again; one in another namespace
/// cannot be attached, and says why; deleting it deletes the DataVolume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_are_data_volumes_hotplugged_into_kubevirt_vms() {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let s = start(&k).await;
    let t = s.token("acme", false);
    let post = |path: &'static str, body: Value| {
        let (s, t) = (&s, t.clone());
        async move {
            let (st, b) = s.raw(Method::POST, &format!("{V1}/{path}"), Some(&t), Some(json!({ "object": body }))).await;
            assert_eq!(st, 201, "{path}: {b}");
            b["object"].clone()
        }
    };
    let state = |v: Option<&Value>| v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("").to_owned();
    let vm = vms::create(&s, &t, "db", "tiny").await;
    vms::wait_ready(&s, &t, &vm).await;
    let vol = post("volumes", json!({"metadata": {"name": "data"}, "spec": {"size": "1Gi", "source_image": "test-guest"}})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api_until(&s, &t, &format!("volumes/{vol}"), "READY", |v| state(v) == "VOLUME_STATE_READY").await;
    let dv = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &vol).await;
    assert_eq!(dv.len(), 1);
    assert_eq!(dv[0]["metadata"]["namespace"], the_vm(&k, &vm).await["metadata"]["namespace"], "unattached: the tenant's namespace");
    assert_eq!(dv[0]["spec"]["sourceRef"], json!({"kind": "DataSource", "name": "test-guest", "namespace": IMAGES}));
    assert_eq!(dv[0]["spec"]["storage"]["resources"]["requests"]["storage"], "1Gi");

    let att =
        post("volume_attachments", json!({"metadata": {"name": "data-on-db"}, "spec": {"volume": "data", "compute_instance": "db"}})).await;
    let (att_id, serial) = (att["id"].as_str().unwrap().to_owned(), att["status"]["serial"].as_str().unwrap().to_owned());
    api_until(&s, &t, &format!("volume_attachments/{att_id}"), "attached", |v| state(v) == "VOLUME_ATTACHMENT_STATE_READY").await;
    let spec = the_vm(&k, &vm).await["spec"]["template"]["spec"].clone();
    let disk = spec["domain"]["devices"]["disks"].as_array().unwrap().iter().find(|d| d["serial"] == serial.as_str()).cloned();
    assert_eq!(disk.as_ref().map(|d| d["disk"].clone()), Some(json!({"bus": "scsi"})), "a hotpluggable SCSI disk: {spec:#}");
    let name = disk.unwrap()["name"].clone();
    let volume = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == name).cloned().unwrap();
    assert_eq!(volume["dataVolume"], json!({"name": dv[0]["metadata"]["name"], "hotpluggable": true}));
    assert_eq!(vms::state(&vms::get(&s, &t, &vm).await.1["object"]), "VIRTUAL_MACHINE_STATE_READY", "hotplugged, not restarted");

    // Detached: the disk leaves the VM, the DataVolume stays.
    assert!(s.raw(Method::DELETE, &format!("{V1}/volume_attachments/{att_id}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("volumes/{vol}"), "READY again", |v| state(v) == "VOLUME_STATE_READY").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while the_vm(&k, &vm).await["spec"]["template"]["spec"]["volumes"].as_array().unwrap().iter().any(|v| v["name"] == name) {
        assert!(std::time::Instant::now() < deadline, "the disk stayed on the VM\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // A VM on a subnet runs in another namespace: the volume cannot follow it there.
    post("virtual_networks", json!({"metadata": {"name": "app"}, "spec": {"ipv4_cidr": "10.70.0.0/16"}})).await;
    post("subnets", json!({"metadata": {"name": "back"}, "spec": {"virtual_network": "app", "ipv4_cidr": "10.70.1.0/24"}})).await;
    let other = post(
        "virtual_machines",
        json!({"metadata": {"name": "far"}, "spec": {"template": "tiny", "network_attachments": [{"subnet": "back"}]}}),
    )
    .await;
    let other = other["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &other).await;
    let far =
        post("volume_attachments", json!({"metadata": {"name": "data-on-far"}, "spec": {"volume": "data", "compute_instance": "far"}}))
            .await;
    let failed = api_until(&s, &t, &format!("volume_attachments/{}", far["id"].as_str().unwrap()), "FAILED", |v| {
        state(v) == "VOLUME_ATTACHMENT_STATE_FAILED"
    })
    .await;
    assert!(failed["status"]["message"].as_str().unwrap_or_default().contains("cannot be used across namespaces"), "{failed:#}");

    // Deleting the volume (once detached) deletes its DataVolume.
    assert!(s.raw(Method::DELETE, &format!("{V1}/volume_attachments/{}", far["id"].as_str().unwrap()), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("volumes/{vol}"), "detached", |v| state(v) == "VOLUME_STATE_READY").await;
    assert!(s.raw(Method::DELETE, &format!("{V1}/volumes/{vol}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("volumes/{vol}"), "gone", |v| v.is_none()).await;
    assert_eq!(objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &vol).await, Vec::<Value>::new());
}

const PICK: &str =
    "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n";

/// An image imported from a URL is a CDI import into the images namespace
/// plus a DataSource of it; a VM boots from it by cloning that DataSource;
/// it is not listed twice; a SHA-256 CDI cannot check is refused; deleting
/// it deletes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_image_is_a_cdi_import_and_a_data_source() {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(k.api());
    let s = start(&k).await;
    vms::publish(&s, PICK);
    let t = s.token("acme", false);
    let state = |v: Option<&Value>| v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("").to_owned();
    // Data for CDI: nothing in the test fetches it.
    let url = "http://127.0.0.1:9/images/alpine.qcow2";
    let (st, img) = s
        .raw(
            Method::POST,
            &format!("{V1}/images"),
            Some(&t),
            Some(json!({"object": {"metadata": {"name": "alpine"}, "spec": {"source": url}}})),
        )
        .await;
    assert_eq!(st, 201, "{img}");
    let id = img["object"]["id"].as_str().unwrap().to_owned();
    let ready = api_until(&s, &t, &format!("images/{id}"), "READY", |v| state(v) == "IMAGE_STATE_READY").await;
    assert_eq!(ready["status"]["format"], "raw", "{ready:#}");
    let dv = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &id).await;
    assert_eq!((dv.len(), &dv[0]["metadata"]["namespace"]), (1, &json!(IMAGES)));
    assert_eq!(dv[0]["spec"]["source"], json!({"http": {"url": url}}));
    assert_eq!(dv[0]["spec"]["storage"]["resources"]["requests"]["storage"], "10Gi");
    let ds = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datasources", &id).await;
    assert_eq!(ds[0]["spec"]["source"]["pvc"], json!({"name": dv[0]["metadata"]["name"], "namespace": IMAGES}));
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("image-") || **n == "alpine").count(), 1, "listed once: {names:?}");

    let body = json!({"object": {"metadata": {"name": "a1"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": "alpine"}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &vm).await;
    let root = the_vm(&k, &vm).await["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"].clone();
    assert_eq!(root, json!({"kind": "DataSource", "name": ds[0]["metadata"]["name"], "namespace": IMAGES}), "cloned from the import");

    let checked = json!({"object": {"metadata": {"name": "checked"}, "spec": {"source": url, "sha256": "0".repeat(64)}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(checked)).await;
    assert_eq!(st, 201, "{img}");
    let failed =
        api_until(&s, &t, &format!("images/{}", img["object"]["id"].as_str().unwrap()), "FAILED", |v| state(v) == "IMAGE_STATE_FAILED")
            .await;
    assert!(failed["status"]["message"].as_str().unwrap_or_default().contains("SHA-256"), "{failed:#}");

    assert!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("virtual_machines/{vm}"), "the VM gone", |v| v.is_none()).await;
    assert!(s.raw(Method::DELETE, &format!("{V1}/images/{id}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("images/{id}"), "the image gone", |v| v.is_none()).await;
    for path in ["/apis/cdi.kubevirt.io/v1beta1/datavolumes", "/apis/cdi.kubevirt.io/v1beta1/datasources"] {
        assert_eq!(objects_of(&k, path, &id).await, Vec::<Value>::new(), "{path} left behind");
    }
}
