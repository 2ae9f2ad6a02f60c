//! The kubevirt backend's networks against a real kube-apiserver with a
//! task playing KubeVirt, OVN-K and MetalLB (`vmaas_tests::kubevirt`):
//! subnets as primary UDNs, security groups as NetworkPolicies, and the
//! two-tier Terraform example with its load balancer.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::k8s::KubeApi;
use vmaas_tests::kubevirt::{SERVICES, VMIS, VMS, env, made, objects_of, the_vm};
use vmaas_tests::vms::{self, V1};

/// A subnet is a namespace with a primary layer-2 UDN; a VM on it runs
/// there, bridged onto it; its security groups are a NetworkPolicy that
/// follows their rules without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_is_a_primary_udn_and_security_groups_are_network_policies() {
    let (k, _kubevirt, s) = env().await;
    let acme = s.token("acme", false);
    let post = |path: &'static str, body: Value| made(&s, &acme, path, body);
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
        "network_attachments": [{"subnet": "front", "security_groups": ["web"], "ip_address": "10.60.1.42"}]}}}),
    )
    .await;
    let ready = vms::wait_ready(&s, &acme, &vm).await;

    let udns = objects_of(&k, "/apis/k8s.ovn.org/v1/userdefinednetworks", &subnet).await;
    assert_eq!(udns.len(), 1, "{udns:#?}");
    let ns = udns[0]["metadata"]["namespace"].as_str().unwrap().to_owned();
    assert_eq!(udns[0]["spec"]["layer2"], json!({"role": "Primary", "subnets": ["10.60.1.0/24"], "ipam": {"lifecycle": "Persistent"}}));
    let (_, namespace) = k.request(Method::GET, &format!("/api/v1/namespaces/{ns}"), None, None).await;
    assert!(namespace["metadata"]["labels"].get("k8s.ovn.org/primary-user-defined-network").is_some(), "{namespace:#}");
    // OVN-K's report and the VM's readiness arrive independently.
    vms::wait_state(&s, &acme, &format!("{V1}/subnets/{subnet}"), "SUBNET_STATE_READY", 30).await;

    let kv = the_vm(&k, &vm).await;
    assert_eq!(kv["metadata"]["namespace"], ns.as_str(), "the VM runs in its subnet's namespace");
    assert_eq!(
        kv["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0],
        json!({"name": "default", "binding": {"name": "l2bridge"}, "model": "virtio"})
    );
    assert_eq!(ready["status"]["internalIPs"][0], ready["status"]["internalIP"], "{ready:#}");
    // The fixed address is asked of OVN-K's IPAM, which gives the guest exactly it.
    let asked = kv["spec"]["template"]["metadata"]["annotations"]["network.kubevirt.io/addresses"].as_str().unwrap_or_default();
    assert_eq!(serde_json::from_str::<Value>(asked).ok(), Some(json!({"default": ["10.60.1.42/24"]})), "{kv:#}");
    assert_eq!(ready["status"]["internalIP"], "10.60.1.42", "{ready:#}");

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
    let (k, _kubevirt, s) = env().await;
    let token = s.token("ci", false);
    let main_tf = std::fs::read_to_string(repo().join("examples/terraform/two-tier/main.tf")).unwrap();
    for tf in Tf::ALL {
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

/// An external IP attached to a VM is asked of MetalLB on the VM's
/// floating-IP Service (`metallb.io/loadBalancerIPs`) and shows as its
/// `externalIP`; re-attached, it moves, and the first VM gets an address
/// of the pool again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_ip_is_asked_of_metallb_and_follows_its_attachment() {
    let (k, _kubevirt, s) = env().await;
    let t = s.token("acme", false);
    let web1 = vms::create(&s, &t, "web1", "tiny").await;
    let web2 = vms::create(&s, &t, "web2", "tiny").await;
    vms::wait_ready(&s, &t, &web1).await;
    vms::wait_ready(&s, &t, &web2).await;
    let ip = s.cli_json(&t, &["external-ip", "create", "pub"]);
    let addr = ip["status"]["address"].as_str().unwrap().to_owned();
    let asked = |k: &KubeApi, vm: String| {
        let k = k.clone();
        async move { objects_of(&k, SERVICES, &vm).await[0]["metadata"]["annotations"]["metallb.io/loadBalancerIPs"].clone() }
    };
    for (on, off) in [(&web1, &web2), (&web2, &web1)] {
        let name = if on == &web1 { "web1" } else { "web2" };
        s.cli_json(&t, &["external-ip", "attach", "pub", "--vm", name]);
        vms::wait_until(&s, &t, on, "the external IP", 30, |v| v["status"]["externalIP"] == addr.as_str()).await;
        assert_eq!(asked(&k, on.clone()).await, json!(addr), "asked of MetalLB");
        let other = vms::wait_until(&s, &t, off, "a pool address", 30, |v| {
            v["status"]["externalIP"].as_str().is_some_and(|a| a.starts_with("192.0.2."))
        })
        .await;
        assert_eq!(asked(&k, off.clone()).await, Value::Null, "{other:#}");
    }
}

/// MetalLB's real controller with a pool of one address (the server asks
/// for pool `tiny`): the first VM gets it; the second is not READY, and its
/// condition says why in MetalLB's words, naming the pool; once the
/// platform team grows the pool, MetalLB is asked again and it is READY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_address_pool_shows_on_the_vm_naming_the_pool() {
    let k = vmaas_tests::k8s::Cluster::start().await;
    let (k, _kubevirt, s) = vmaas_tests::kubevirt::env_with(k, &["--metallb-pool", "tiny"]).await;
    vmaas_tests::metallb::pool(&k, "tiny", "198.51.100.7/32", false).await;
    let t = s.token("acme", false);
    let first = vms::create(&s, &t, "first", "tiny").await;
    let first =
        vms::wait_until(&s, &t, &first, "READY with the pool's address", 60, |v| v["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY")
            .await;
    assert_eq!(first["status"]["externalIP"], "198.51.100.7");
    let second = vms::create(&s, &t, "second", "tiny").await;
    let pending = vms::wait_until(&s, &t, &second, "MetalLB's reason", 60, |v| {
        v["status"]["conditions"].to_string().contains("no available IPs in pool tiny")
    })
    .await;
    assert_eq!(pending["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING", "{pending:#}");
    assert!(pending["status"]["conditions"].to_string().contains("FloatingIpPending"), "{pending:#}");
    vmaas_tests::metallb::pool(&k, "tiny", "198.51.100.6/31", false).await;
    let ready =
        vms::wait_until(&s, &t, &second, "READY once the pool grew", 60, |v| v["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY").await;
    assert_eq!(ready["status"]["externalIP"], "198.51.100.6", "{ready:#}");
}
