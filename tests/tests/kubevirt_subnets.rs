//! Subnets as OVN-K secondary networks (`--subnet-networks secondary`)
//! against a real kube-apiserver with the CRDs of OVN-K and Multus, and a
//! task playing KubeVirt and OVN-K (`vmaas_tests::kubevirt`): a VM on two
//! subnets is on the pod network and on a Multus NIC of each subnet's
//! secondary layer-2 CUDN, told its addresses by cloud-init; each NIC's
//! security groups are a MultiNetworkPolicy for that network; everything
//! is accepted Strict; a NAT gateway of the network is an EgressIP for
//! the pods of the network's VMs; and deleting leaves nothing. A network
//! of a physical network's class (`--physical-network`) has localnet
//! subnets, its VMs' NICs bridged onto the physical network.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::k8s::{Cluster, KubeApi};
use vmaas_tests::kubevirt::{VMS, env_with, made, objects_of, the_vm};
use vmaas_tests::vms::{self, V1};

const CUDNS: &str = "/apis/k8s.ovn.org/v1/clusteruserdefinednetworks";
const MNPS: &str = "/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies";
const EGRESS_IPS: &str = "/apis/k8s.ovn.org/v1/egressips";

/// Waits until `get` gives something, for at most 30 s.
async fn until<T, F: std::future::Future<Output = Option<T>>>(what: &str, mut get: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = get().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The MultiNetworkPolicies of VM `id`, by name.
async fn policies(k: &KubeApi, id: &str) -> Vec<Value> {
    let mut p = objects_of(k, MNPS, id).await;
    p.sort_by_key(|p| p["metadata"]["name"].as_str().unwrap_or_default().to_owned());
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_on_two_subnets_has_a_multus_nic_on_each_with_its_security_groups() {
    let (k, _kubevirt, s) = env_with(Cluster::start().await, &["--subnet-networks", "secondary"]).await;
    let acme = s.token("acme", false);
    let post = |path: &'static str, body: Value| made(&s, &acme, path, body);
    let network = post("virtual_networks", json!({"object": {"metadata": {"name": "app"}, "spec": {"ipv4_cidr": "10.60.0.0/16"}}})).await;
    let mut subnets = Vec::new();
    for (name, cidr) in [("front", "10.60.1.0/24"), ("back", "10.60.2.0/24")] {
        let body = json!({"object": {"metadata": {"name": name}, "spec": {"virtual_network": "app", "ipv4_cidr": cidr}}});
        subnets.push(post("subnets", body).await);
    }
    let sg = post(
        "security_groups",
        json!({"object": {"metadata": {"name": "web"}, "spec": {"virtual_network": "app",
        "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 80}, {"protocol": "PROTOCOL_UDP", "port_from": 5000, "port_to": 5001}],
        "egress": [{"protocol": "PROTOCOL_ALL"}]}}}),
    )
    .await;
    let vm = post(
        "virtual_machines",
        json!({"object": {"metadata": {"name": "web"}, "spec": {"template": "tiny", "network_attachments": [
            {"subnet": "front", "security_groups": ["web"], "ip_address": "10.60.1.42"},
            {"subnet": "back", "ip_address": "10.60.2.7"}]}}}),
    )
    .await;
    let ready = vms::wait_ready(&s, &acme, &vm).await;
    assert_eq!(
        (&ready["status"]["internalIP"], &ready["status"]["internalIPs"]),
        (&json!("10.60.1.42"), &json!(["10.60.1.42", "10.60.2.7"])),
        "{ready:#}"
    );

    // Each subnet is a secondary layer-2 CUDN without OVN-K's IPAM, over the tenant's namespace.
    let kv = the_vm(&k, &vm).await;
    let ns = kv["metadata"]["namespace"].as_str().unwrap().to_owned();
    let mut nads = Vec::new();
    for (subnet, cidr) in subnets.iter().zip(["10.60.1.0/24", "10.60.2.0/24"]) {
        let c = objects_of(&k, CUDNS, subnet).await;
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(c[0]["spec"]["network"], json!({"topology": "Layer2", "layer2": {"role": "Secondary", "ipam": {"mode": "Disabled"}}}));
        assert_eq!(c[0]["metadata"]["annotations"]["vmaas.io/cidr"], cidr);
        let selected = &c[0]["spec"]["namespaceSelector"]["matchExpressions"][0];
        let (_, namespace) = k.request(Method::GET, &format!("/api/v1/namespaces/{ns}"), None, None).await;
        assert_eq!(selected["values"], json!([namespace["metadata"]["labels"]["vmaas.io/tenant"]]), "the tenant's namespace: {c:#?}");
        vms::wait_state(&s, &acme, &format!("{V1}/subnets/{subnet}"), "SUBNET_STATE_READY", 30).await;
        nads.push(format!("{ns}/{}", c[0]["metadata"]["name"].as_str().unwrap()));
    }

    // The pod network first (masqueraded), then a bridged Multus NIC per subnet with its MAC.
    let spec = &kv["spec"]["template"]["spec"];
    let networks = spec["networks"].as_array().unwrap();
    assert_eq!(networks[0], json!({"name": "default", "pod": {}}));
    assert_eq!(
        networks[1..],
        [json!({"name": "subnet-0", "multus": {"networkName": nads[0]}}), json!({"name": "subnet-1", "multus": {"networkName": nads[1]}})]
    );
    let nics = spec["domain"]["devices"]["interfaces"].as_array().unwrap();
    assert!(nics[0]["masquerade"].is_object(), "{nics:#?}");
    let macs: Vec<&str> = nics.iter().map(|n| n["macAddress"].as_str().unwrap_or_default()).collect();
    assert!(macs.iter().all(|m| m.starts_with("52:54:")) && macs.len() == 3, "every NIC has its MAC: {nics:#?}");
    assert!(nics[1..].iter().all(|n| n["bridge"].is_object()), "{nics:#?}");
    // cloud-init tells the guest each address, by MAC.
    let volumes = spec["volumes"].as_array().unwrap();
    let data = volumes.iter().find_map(|v| v["cloudInitNoCloud"]["networkData"].as_str()).expect("network data");
    for (mac, address) in [(macs[0], None), (macs[1], Some("10.60.1.42/24")), (macs[2], Some("10.60.2.7/24"))] {
        assert!(data.contains(mac), "{data}");
        assert!(address.is_none_or(|a| data.contains(a)), "{data}");
    }

    // One MultiNetworkPolicy, for the NIC with security groups, on its network; port ranges listed.
    let p = policies(&k, &vm).await;
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(p[0]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/policy-for"], nads[0].as_str());
    assert_eq!(p[0]["spec"]["podSelector"], json!({"matchLabels": {"vmaas.io/id": vm}}));
    assert_eq!(p[0]["spec"]["ingress"][1]["ports"], json!([{"protocol": "UDP", "port": 5000}, {"protocol": "UDP", "port": 5001}]));

    // A changed rule reaches the policy without a restart.
    let patch = json!({"object": {"spec": {"ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 80},
        {"protocol": "PROTOCOL_UDP", "port_from": 5000, "port_to": 5001}, {"protocol": "PROTOCOL_TCP", "port_from": 22, "ipv4_cidr": "10.60.2.0/24"}]}}});
    let (st, body) = s.raw(Method::PATCH, &format!("{V1}/security_groups/{sg}"), Some(&acme), Some(patch)).await;
    assert_eq!(st, 200, "{body}");
    let p = until("the new rule", || async {
        Some(policies(&k, &vm).await).filter(|p| p[0]["spec"]["ingress"].as_array().is_some_and(|i| i.len() == 3))
    })
    .await;
    assert_eq!(
        p[0]["spec"]["ingress"][2],
        json!({"from": [{"ipBlock": {"cidr": "10.60.2.0/24"}}], "ports": [{"protocol": "TCP", "port": 22}]})
    );
    assert_eq!(vms::state(&vms::get(&s, &acme, &vm).await.1["object"]), "VIRTUAL_MACHINE_STATE_READY", "no restart");

    let gone = |url: String| {
        let (s, acme) = (&s, acme.clone());
        async move {
            assert!(s.raw(Method::DELETE, &url, Some(&acme), None).await.0 < 300);
            until(&url, || async { (s.raw(Method::GET, &url, Some(&acme), None).await.0 == 404).then_some(()) }).await;
        }
    };
    // A NAT gateway of the network is an EgressIP of its address for the
    // pods of the network's VMs, READY once OVN-K put it on a node.
    let ip = s.cli_json(&acme, &["external-ip", "create", "out"]);
    let address = ip["status"]["address"].as_str().unwrap().to_owned();
    let gw =
        post("nat_gateways", json!({"object": {"metadata": {"name": "gw"}, "spec": {"virtual_network": "app", "external_ip": "out"}}}))
            .await;
    vms::wait_state(&s, &acme, &format!("{V1}/nat_gateways/{gw}"), "NAT_GATEWAY_STATE_READY", 30).await;
    let eip = objects_of(&k, EGRESS_IPS, &gw).await;
    assert_eq!(eip.len(), 1, "{eip:#?}");
    let label = format!("network.vmaas.io/{network}");
    assert_eq!(eip[0]["spec"]["egressIPs"], json!([address]));
    assert_eq!(eip[0]["spec"]["podSelector"], json!({"matchLabels": {label.clone(): "true"}}));
    assert_eq!(eip[0]["spec"]["namespaceSelector"]["matchLabels"]["vmaas.io/tenant"], "acme");
    let kv = the_vm(&k, &vm).await;
    assert_eq!(kv["spec"]["template"]["metadata"]["labels"][&label], "true", "the VM's pods are the network's");
    gone(format!("{V1}/nat_gateways/{gw}")).await;
    assert_eq!(objects_of(&k, EGRESS_IPS, &gw).await, Vec::<Value>::new(), "the EgressIP goes with the gateway");

    // Deleting the VM removes its policies; the subnets go with their CUDNs.
    gone(format!("{V1}/virtual_machines/{vm}")).await;
    for subnet in &subnets {
        gone(format!("{V1}/subnets/{subnet}")).await;
    }
    assert_eq!(policies(&k, &vm).await, Vec::<Value>::new(), "policies left behind");
    assert_eq!(objects_of(&k, VMS, &vm).await, Vec::<Value>::new());
    for subnet in &subnets {
        assert_eq!(objects_of(&k, CUDNS, subnet).await, Vec::<Value>::new(), "a CUDN left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_of_a_physical_class_has_localnet_subnets_and_bridged_nics() {
    let flags = ["--subnet-networks", "secondary", "--physical-network", "lab=physnet-lab/120"];
    let (k, _kubevirt, s) = env_with(Cluster::start().await, &flags).await;
    let acme = s.token("acme", false);
    let post = |path: &'static str, body: Value| made(&s, &acme, path, body);
    let (_, health) = s.raw(Method::GET, "/healthz", None, None).await;
    assert_eq!(health["backend"]["capabilities"]["network_classes"], json!(["lab"]), "{health}");
    let network =
        |class: &str| json!({"object": {"metadata": {"name": "floor"}, "spec": {"ipv4_cidr": "192.168.120.0/24", "network_class": class}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&acme), Some(network("office"))).await;
    assert_eq!((st, &e["details"][0]["field"]), (400, &json!("object.spec.network_class")), "{e}");
    assert!(e["details"][0]["reason"].as_str().unwrap().contains("it offers lab"), "{e}");
    // The CLI names the class.
    let floor = s.cli_json(&acme, &["network", "create", "floor", "--cidr", "192.168.120.0/24", "--class", "lab"]);
    assert_eq!(floor["spec"]["network_class"], "lab", "{floor}");
    let body = json!({"object": {"metadata": {"name": "desks"}, "spec": {"virtual_network": "floor", "ipv4_cidr": "192.168.120.0/24"}}});
    let subnet = post("subnets", body).await;

    // The subnet is a localnet CUDN on the bridge mapping, tagged, without OVN-K's IPAM.
    let c = until("the localnet", || async { objects_of(&k, CUDNS, &subnet).await.pop() }).await;
    let localnet = json!({"role": "Secondary", "physicalNetworkName": "physnet-lab", "ipam": {"mode": "Disabled"},
        "vlan": {"mode": "Access", "access": {"id": 120}}});
    assert_eq!(c["spec"]["network"], json!({"topology": "Localnet", "localnet": localnet}), "{c:#}");
    vms::wait_state(&s, &acme, &format!("{V1}/subnets/{subnet}"), "SUBNET_STATE_READY", 30).await;

    // A VM's NIC on it is bridged onto the physical network, its address told by cloud-init.
    let body = json!({"object": {"metadata": {"name": "desk"}, "spec": {"template": "tiny",
        "network_attachments": [{"subnet": "desks", "ip_address": "192.168.120.50"}]}}});
    let vm = post("virtual_machines", body).await;
    let ready = vms::wait_ready(&s, &acme, &vm).await;
    assert_eq!(ready["status"]["internalIP"], "192.168.120.50", "{ready:#}");
    let kv = the_vm(&k, &vm).await;
    let spec = &kv["spec"]["template"]["spec"];
    let ns = kv["metadata"]["namespace"].as_str().unwrap();
    let nad = format!("{ns}/{}", c["metadata"]["name"].as_str().unwrap());
    assert_eq!(spec["networks"][1], json!({"name": "subnet-0", "multus": {"networkName": nad}}), "{spec:#}");
    assert!(spec["domain"]["devices"]["interfaces"][1]["bridge"].is_object(), "{spec:#}");
    let data =
        spec["volumes"].as_array().unwrap().iter().find_map(|v| v["cloudInitNoCloud"]["networkData"].as_str()).expect("network data");
    assert!(data.contains("192.168.120.50/24"), "{data}");

    for url in [format!("{V1}/virtual_machines/{vm}"), format!("{V1}/subnets/{subnet}")] {
        assert!(s.raw(Method::DELETE, &url, Some(&acme), None).await.0 < 300);
        until(&url, || async { (s.raw(Method::GET, &url, Some(&acme), None).await.0 == 404).then_some(()) }).await;
    }
    assert_eq!(objects_of(&k, CUDNS, &subnet).await, Vec::<Value>::new(), "the localnet goes with its subnet");
}
