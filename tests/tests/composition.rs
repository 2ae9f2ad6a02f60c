//! The shipped Crossplane package, installed as shipped into a real
//! kube-apiserver with the real CRDs, and composed through the real
//! `function-vmaas` over gRPC by a test playing Crossplane and its claim
//! controller (`vmaas_tests::crossplane`): every example claim and XR
//! composes objects the API server accepts; then the test plays OVN-K,
//! KubeVirt and the load balancer, and the claims report ready with their
//! addresses. Teams never meet; bad claims end in a fatal result and
//! compose nothing.

use serde_json::{Value, json};
use vmaas_tests::crossplane::{COMPOSITE_LABEL, Crossplane, FunctionProcess, Outcome, compositions_dir};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::metallb::Metallb;
use vmaas_tests::xcrd::{claim_crd, xr_crd};

fn example(file: &str) -> Value {
    serde_norway::from_str(&std::fs::read_to_string(compositions_dir().join(file)).unwrap()).unwrap()
}

fn documents(file: &str) -> Vec<Value> {
    vmaas_tests::tools::yaml_documents(&compositions_dir().join(file))
}

/// The function input of a shipped Composition's only pipeline step.
fn input_of(composition: &str) -> Value {
    example(composition)["spec"]["pipeline"][0]["input"].clone()
}

async fn applied(k: &Cluster, obj: &Value, plural: &str, manager: &str) -> Value {
    let (st, body) = k.apply(obj, plural, manager).await;
    assert!(st == 200 || st == 201, "{plural} refused: {st} {body:#}");
    body
}

async fn install(k: &Cluster, crd: &Value) {
    let name = k.install_crd(crd).await;
    k.wait_established(&name).await;
}

/// Crossplane's `ClusterUsage` CRD, from its module (`../shared/k8s` has none).
fn usage_crd() -> std::path::PathBuf {
    vmaas_tests::tools::crossplane_crds().join("protection.crossplane.io_clusterusages.yaml")
}

/// A cluster with the package installed as shipped: XRDs, Compositions,
/// the Function, the template CRD and catalog, the XR and claim CRDs
/// Crossplane would generate, and the namespaces of two teams.
async fn installed() -> (Cluster, FunctionProcess, Metallb) {
    installed_with(&vmaas_tests::metallb::DEFAULT_POOLS).await
}

/// [`installed`], with MetalLB's controller giving addresses from `pools`.
async fn installed_with(pools: &[(&str, &str, bool)]) -> (Cluster, FunctionProcess, Metallb) {
    let k = Cluster::start().await;
    let metallb = Metallb::start(&k, pools).await;
    let usage: Value = serde_norway::from_str(&std::fs::read_to_string(usage_crd()).unwrap()).unwrap();
    install(&k, &usage).await;
    for kind in ["virtualmachine", "virtualprivatesubnet", "physicalnetwork", "loadbalancer", "volume"] {
        let file = format!("xrd-{kind}.yaml");
        let xrd = applied(&k, &example(&file), "compositeresourcedefinitions", "platform-team").await;
        applied(&k, &example(&format!("composition-{kind}.yaml")), "compositions", "platform-team").await;
        install(&k, &xr_crd(&xrd)).await;
        if xrd["spec"].get("claimNames").is_some() {
            install(&k, &claim_crd(&xrd)).await;
        }
    }
    applied(&k, &example("function.yaml"), "functions", "platform-team").await;
    install(&k, &example("crd-virtualmachinetemplate.yaml")).await;
    for t in documents("templates.yaml") {
        applied(&k, &t, "virtualmachinetemplates", "platform-team").await;
    }
    for ns in ["team-a", "team-b"] {
        k.namespace(ns).await;
    }
    (k, FunctionProcess::start(&["--insecure"]), metallb)
}

/// Plays OVN-K: the network of `obj` (a UDN or CUDN) is created.
async fn ovn_created(k: &Cluster, obj: &Value, plural: &str) {
    let cond = json!([{"type": "NetworkCreated", "status": "True", "reason": "NetworkAttachmentDefinitionCreated",
        "message": "NetworkAttachmentDefinition has been created", "lastTransitionTime": "2026-11-22T10:00:00Z"}]);
    let (st, body) = k.write_status(obj, plural, json!({"conditions": cond})).await;
    assert_eq!(st, 200, "{body:#}");
}

/// Plays KubeVirt and the load balancer for a started VM: ready, its VMI
/// (labelled from the VM's template, as its launcher pod is) ready and
/// addressed on each NIC, its Service given an ingress IP.
async fn kubevirt_runs(k: &Cluster, o: &Outcome, nics: &[(&str, &str)]) {
    let vm = &o.composed["vm"];
    let (st, body) = k.write_status(vm, "virtualmachines", json!({"ready": true, "printableStatus": "Running"})).await;
    assert_eq!(st, 200, "{body:#}");
    let vmi = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": vm["metadata"]["name"], "namespace": vm["metadata"]["namespace"],
                     "labels": vm["spec"]["template"]["metadata"]["labels"]},
        "spec": {"domain": {"devices": {}}}});
    applied(k, &vmi, "virtualmachineinstances", "virt-controller").await;
    let interfaces: Vec<Value> = nics.iter().map(|(n, ip)| json!({"name": n, "ipAddress": ip})).collect();
    let status = json!({"phase": "Running", "interfaces": interfaces, "conditions": [{"type": "Ready", "status": "True"}]});
    let (st, body) = k.write_status(&vmi, "virtualmachineinstances", status).await;
    assert_eq!(st, 200, "{body:#}");
}

/// The address MetalLB's controller gives Service `svc` (waited for).
async fn address_of(k: &Cluster, svc: &Value) -> String {
    let path = Cluster::path_of(svc, "services");
    for _ in 0..150 {
        let (_, now) = k.request(reqwest::Method::GET, &path, None, None).await;
        if let Some(ip) = now["status"]["loadBalancer"]["ingress"][0]["ip"].as_str() {
            return ip.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("MetalLB gave {path} no address within 30 s");
}

/// Every composed resource carries Crossplane's marks, fits 63 characters,
/// and (namespaced) sits in the namespace the XR reports.
fn assert_composed_by(o: &Outcome) {
    for (key, obj) in &o.composed {
        assert_eq!(obj["metadata"]["labels"][COMPOSITE_LABEL], o.xr["metadata"]["name"], "{key}");
        assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], o.xr["metadata"]["uid"], "{key}");
        assert!(obj["metadata"]["name"].as_str().unwrap().len() <= 63, "{key}");
        if let Some(ns) = obj["metadata"]["namespace"].as_str() {
            assert_eq!(Some(ns), o.xr["status"]["namespace"].as_str(), "{key} is in the namespace its XR reports");
        }
    }
}

/// The claim's status, as its owner sees it.
fn claim_status(o: &Outcome) -> &Value {
    &o.claim.as_ref().expect("a claim")["status"]
}

/// The claim's condition `kind`.
fn claim_condition<'a>(o: &'a Outcome, kind: &str) -> &'a Value {
    let cs = claim_status(o)["conditions"].as_array().expect("the claim's conditions");
    cs.iter().find(|c| c["type"] == kind).unwrap_or_else(|| panic!("the claim has no {kind} condition: {cs:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_example_composes_and_reports_ready_once_the_cluster_runs_it() {
    let (k, f, _metallb) = installed().await;

    // The platform team's physical network, for team-a.
    let net_xp = Crossplane::new(&k, &f, input_of("composition-physicalnetwork.yaml"));
    let lab = applied(&k, &example("xr-physicalnetwork.yaml"), "physicalnetworks", "platform-team").await;
    let o = net_xp.reconcile("physicalnetworks", &lab).await;
    assert!(o.fatal.is_empty(), "{:?}", o.fatal);
    assert_eq!(o.composed.keys().collect::<Vec<_>>(), ["cudn"]);
    assert!(!o.ready() && o.xr["status"]["state"] == "PENDING", "{:#}", o.xr);
    let cudn = o.composed["cudn"].clone();
    ovn_created(&k, &cudn, "clusteruserdefinednetworks").await;
    let o = net_xp.reconcile("physicalnetworks", &lab).await;
    assert!(o.ready() && o.xr["status"]["state"] == "READY", "{:#}", o.xr);
    assert_eq!(o.condition("NetworkReady").unwrap()["status"], "True");

    // Team-a's private network: a namespace of its own with a primary UDN.
    let private_xp = Crossplane::new(&k, &f, input_of("composition-virtualprivatesubnet.yaml"));
    let claim = applied(&k, &example("claim-virtualprivatesubnet.yaml"), "virtualprivatesubnets", "team-a").await;
    let o = private_xp.reconcile_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &claim).await;
    assert_eq!(o.composed.keys().collect::<Vec<_>>(), ["namespace", "udn"]);
    assert_composed_by(&o);
    let labels = &o.composed["namespace"]["metadata"]["labels"];
    assert!(labels["k8s.ovn.org/primary-user-defined-network"] == "" && labels["vmaas.io/tenant"] == "team-a", "{labels}");
    assert_eq!(o.composed["udn"]["spec"]["layer2"]["role"], "Primary");
    ovn_created(&k, &o.composed["udn"], "userdefinednetworks").await;
    let o = private_xp.reconcile_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &claim).await;
    assert!(o.ready(), "{:#}", o.xr);
    let net_ns = o.xr["status"]["namespace"].as_str().unwrap().to_owned();
    assert_eq!(claim_status(&o)["state"], "READY", "the claim shows its XR's status");
    assert_eq!(claim_status(&o)["ipv4Cidr"], "192.168.100.0/24");

    // A web server from the cluster's catalog on that network, with a script and a key.
    let vm_xp = Crossplane::new(&k, &f, input_of("composition-virtualmachine.yaml"));
    let web = json!({"apiVersion": "vmaas.io/v1alpha1", "kind": "VirtualMachine", "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"template": "web", "templateParameters": {"vm_memory": "2Gi"}, "network": "example",
                 "userData": "#!/bin/sh\necho hello > /tmp/hello\n", "sshKeys": ["ssh-ed25519 AAAAC3Nz web@example"]}});
    let web = applied(&k, &web, "virtualmachines", "team-a").await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &web).await;
    assert!(o.fatal.is_empty() && o.warnings.is_empty(), "{:?} {:?}", o.fatal, o.warnings);
    assert_eq!(o.composed.keys().collect::<Vec<_>>(), ["service", "usage", "vm"], "the VM lives in its network's namespace, and uses it");
    assert_composed_by(&o);
    assert_eq!(o.composed["vm"]["metadata"]["namespace"], net_ns.as_str());
    let t = &o.composed["vm"]["spec"]["template"]["spec"];
    assert_eq!(t["domain"]["devices"]["interfaces"][0]["binding"]["name"], "l2bridge", "bridged onto the primary UDN");
    assert_eq!(t["domain"]["memory"]["guest"], "2Gi");
    let user_data = t["volumes"].as_array().unwrap().iter().find_map(|v| v["cloudInitNoCloud"]["userData"].as_str()).unwrap();
    assert!(user_data.contains("echo hello") && user_data.contains("web@example"), "{user_data}");
    kubevirt_runs(&k, &o, &[("default", "192.168.100.9")]).await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &web).await;
    assert!(o.ready() && claim_status(&o)["internalIP"] == "192.168.100.9", "{:#}", o.xr);

    // The seed's VM, on a network of its own and on the lab network.
    let mut claim = example("claim-virtualmachine.yaml");
    claim["spec"]["physicalNetwork"] = json!("lab");
    let vm = applied(&k, &claim, "virtualmachines", "team-a").await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &vm).await;
    assert!(o.fatal.is_empty() && o.warnings.is_empty(), "{:?} {:?}", o.fatal, o.warnings);
    assert_eq!(o.composed.keys().collect::<Vec<_>>(), ["namespace", "service", "udn", "vm"]);
    assert_composed_by(&o);
    assert!(!o.ready() && o.xr["status"]["state"] == "PROGRESSING", "{:#}", o.xr);
    // The tenant reads its claim: the function's condition is there, with its reason.
    let c = claim_condition(&o, "VirtualMachineReady");
    assert!(c["status"] == "False" && c["reason"] == "Creating", "{c:#}");
    assert_eq!(claim_condition(&o, "Ready")["reason"], "Waiting");
    // The lab CUDN selects this VM's namespace: OVN-K gives it the network.
    let selector = &cudn["spec"]["namespaceSelector"]["matchExpressions"][0];
    let ns_labels = &o.composed["namespace"]["metadata"]["labels"];
    let key = selector["key"].as_str().unwrap();
    assert!(selector["values"].as_array().unwrap().contains(&ns_labels[key]), "{selector} vs {ns_labels}");
    assert_eq!(o.composed["vm"]["spec"]["template"]["spec"]["networks"][1]["multus"]["networkName"], "lab");

    ovn_created(&k, &o.composed["udn"], "userdefinednetworks").await;
    kubevirt_runs(&k, &o, &[("default", "10.200.0.5"), ("lab", "192.168.50.7")]).await;
    let floating = address_of(&k, &o.composed["service"]).await;
    assert!(floating.starts_with("192.0.2."), "from the pool the composition names: {floating}");
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &vm).await;
    assert!(o.ready(), "{:#}", o.xr);
    let status = claim_status(&o);
    assert_eq!(
        (status["state"].as_str(), status["internalIP"].as_str(), status["externalIP"].as_str()),
        (Some("READY"), Some("10.200.0.5"), Some(floating.as_str())),
        "{status:#}"
    );
    assert_eq!(o.condition("VirtualMachineReady").unwrap()["status"], "True", "{status:#}");
    let c = claim_condition(&o, "VirtualMachineReady");
    assert!(c["status"] == "True" && c["reason"] == "GuestReady", "{c:#}");
    assert_eq!(o.xr["status"]["claimConditionTypes"], json!(["VirtualMachineReady"]));

    // Stopped: KubeVirt halts it, and its floating IP goes away.
    let mut stop = claim.clone();
    stop["spec"]["state"] = json!("stopped");
    applied(&k, &stop, "virtualmachines", "team-a").await;
    let svc = o.composed["service"].clone();
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &vm).await;
    assert_eq!(o.composed["vm"]["spec"]["runStrategy"], "Halted");
    assert!(!o.composed.contains_key("service"), "no floating IP for a stopped VM");
    assert_eq!(k.request(reqwest::Method::GET, &Cluster::path_of(&svc, "services"), None, None).await.0, 404);
    let (st, _) = k.write_status(&o.composed["vm"], "virtualmachines", json!({"ready": false, "printableStatus": "Stopped"})).await;
    assert_eq!(st, 200);
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &vm).await;
    assert!(o.ready() && claim_status(&o)["state"] == "STOPPED", "{:#}", o.xr);
}

/// `claim-virtualmachine.yaml` in `ns`, with `spec` merged in (null removes a field).
fn vm_claim(ns: &str, name: &str, spec: Value) -> Value {
    let mut claim = example("claim-virtualmachine.yaml");
    claim["metadata"]["namespace"] = json!(ns);
    claim["metadata"]["name"] = json!(name);
    if let (Some(x), Some(s)) = (claim["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in s {
            if v.is_null() {
                x.remove(k);
            } else {
                x.insert(k.clone(), v.clone());
            }
        }
    }
    claim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teams_never_collide_and_bad_claims_compose_nothing() {
    let (k, f, _metallb) = installed().await;
    let lab = applied(&k, &example("xr-physicalnetwork.yaml"), "physicalnetworks", "platform-team").await;
    Crossplane::new(&k, &f, input_of("composition-physicalnetwork.yaml")).reconcile("physicalnetworks", &lab).await;
    let net_xp = Crossplane::new(&k, &f, input_of("composition-virtualprivatesubnet.yaml"));
    let net = applied(&k, &example("claim-virtualprivatesubnet.yaml"), "virtualprivatesubnets", "team-a").await;
    net_xp.reconcile_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &net).await;
    let xp = Crossplane::new(&k, &f, input_of("composition-virtualmachine.yaml"));
    let claim = |ns: &str, name: &str, spec: Value| vm_claim(ns, name, spec);

    // `myvm` of team-a and `myvm` of team-b: two XRs, two namespaces, two VMs.
    let a = applied(&k, &claim("team-a", "myvm", json!({})), "virtualmachines", "team-a").await;
    let b = applied(&k, &claim("team-b", "myvm", json!({})), "virtualmachines", "team-b").await;
    let oa = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &a).await;
    let ob = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &b).await;
    assert_composed_by(&oa);
    assert_composed_by(&ob);
    assert_ne!(oa.xr["status"]["namespace"], ob.xr["status"]["namespace"]);
    assert_ne!(oa.composed["vm"]["metadata"]["uid"], ob.composed["vm"]["metadata"]["uid"]);
    assert_eq!(ob.composed["namespace"]["metadata"]["labels"]["vmaas.io/tenant"], "team-b");

    // Team-b has no network "example" (team-a's is not theirs): the VM waits, nothing composed.
    let c = applied(&k, &claim("team-b", "other", json!({"network": "example"})), "virtualmachines", "team-b").await;
    let oc = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    assert!(oc.warnings.iter().any(|w| w.contains("spec.network") && w.contains("team-b")), "{:?}", oc.warnings);
    assert!(oc.composed.is_empty(), "{:?}", oc.composed.keys());

    // Bad claims, and a physical network not offered to team-b: fatal, nothing composed.
    let bad_cases = [
        ("offered", json!({"network": null, "physicalNetwork": "lab"}), "spec.physicalNetwork"),
        ("unknown-template", json!({"template": "no_such_template"}), "spec.template"),
        ("bad-parameter", json!({"templateParameters": {"vm_memory": {"value": "4GB"}}}), "spec.templateParameters.vm_memory"),
        ("bad-network", json!({"network": "10.0.0.1/8"}), "spec.network"),
    ];
    for (name, spec, field) in bad_cases {
        let c = applied(&k, &claim("team-b", name, spec), "virtualmachines", "team-b").await;
        let o = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
        assert!(o.fatal.len() == 1 && o.fatal[0].contains(field), "{name}: {:?}", o.fatal);
        assert!(o.composed.is_empty(), "{name}: nothing composed: {:?}", o.composed.keys());
        let (_, vms) = k.request(reqwest::Method::GET, "/apis/kubevirt.io/v1/virtualmachines", None, None).await;
        let names: Vec<&str> = vms["items"].as_array().unwrap().iter().filter_map(|v| v["metadata"]["name"].as_str()).collect();
        assert!(!names.contains(&name), "{name}: {names:?}");
    }

    // The longest name a claim can have composes objects whose names all
    // fit; a longer one is refused by the claim's own CRD.
    let c = applied(&k, &claim("team-a", &"v".repeat(63), json!({})), "virtualmachines", "team-a").await;
    let o = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    assert!(o.fatal.is_empty() && o.composed.len() == 4, "{:?} {:?}", o.fatal, o.composed.keys());
    assert_composed_by(&o);
    let (st, _) = k.apply(&claim("team-a", &"v".repeat(64), json!({})), "virtualmachines", "team-a").await;
    assert_eq!(st, 422, "the claim CRD caps names at 63 characters");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_spreads_over_its_hosts_and_a_used_subnet_is_kept() {
    // A pool of two addresses: the web VMs' floating IPs take both.
    let (k, f, _metallb) = installed_with(&[("public", "192.0.2.80/31", true)]).await;
    let net_xp = Crossplane::new(&k, &f, input_of("composition-virtualprivatesubnet.yaml"));
    let vm_xp = Crossplane::new(&k, &f, input_of("composition-virtualmachine.yaml"));
    let lb_xp = Crossplane::new(&k, &f, input_of("composition-loadbalancer.yaml"));
    let net = applied(&k, &example("claim-virtualprivatesubnet.yaml"), "virtualprivatesubnets", "team-a").await;
    let o = net_xp.reconcile_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &net).await;
    ovn_created(&k, &o.composed["udn"], "userdefinednetworks").await;
    let net_ns = o.xr["status"]["namespace"].as_str().unwrap().to_owned();

    // The seed's load balancer before its hosts: it waits, composing nothing.
    let lb = applied(&k, &example("claim-loadbalancer.yaml"), "loadbalancers", "team-a").await;
    let o = lb_xp.reconcile_claim("loadbalancers", "xloadbalancers", &lb).await;
    assert!(o.fatal.is_empty() && o.composed.is_empty(), "{:?} {:?}", o.fatal, o.composed.keys());
    assert!(o.warnings.iter().any(|w| w.contains("spec.hostRefs")), "{:?}", o.warnings);
    // It says so, naming the hosts, on the XR and on the claim the tenant reads.
    for status in [&o.xr["status"], claim_status(&o)] {
        let message = status["message"].as_str().unwrap_or_default();
        assert!(status["state"] == "PENDING" && message.contains("web-1, web-2"), "{status:#}");
    }
    let c = claim_condition(&o, "LoadBalancerReady");
    assert!(c["status"] == "False" && c["reason"] == "WaitingForHosts", "{c:#}");

    // Two web VMs on the network: each is labelled for the load balancer,
    // and uses the network.
    let mut webs = Vec::new();
    for (name, ip) in [("web-1", "192.168.100.11"), ("web-2", "192.168.100.12")] {
        let c = applied(&k, &vm_claim("team-a", name, json!({"network": "example", "expose": []})), "virtualmachines", "team-a").await;
        let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
        assert!(o.fatal.is_empty(), "{:?}", o.fatal);
        assert_eq!(o.composed["vm"]["spec"]["template"]["metadata"]["labels"]["lb.vmaas.io/example"], "true", "{name}");
        let usage = &o.composed["usage"]["spec"];
        assert_eq!(
            (usage["of"]["kind"].as_str(), usage["by"]["resourceRef"]["name"].as_str()),
            (Some("XVirtualPrivateSubnet"), o.xr["metadata"]["name"].as_str())
        );
        kubevirt_runs(&k, &o, &[("default", ip)]).await;
        webs.push((c, o));
    }
    // A VM the load balancer does not name carries no label.
    let other = applied(&k, &vm_claim("team-a", "db", json!({"network": "example", "expose": []})), "virtualmachines", "team-a").await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &other).await;
    assert!(o.composed["vm"]["spec"]["template"]["metadata"]["labels"].get("lb.vmaas.io/example").is_none());
    kubevirt_runs(&k, &o, &[("default", "192.168.100.13")]).await;

    // The Service is in the VMs' namespace and selects exactly the two web VMs' pods.
    let o = lb_xp.reconcile_claim("loadbalancers", "xloadbalancers", &lb).await;
    assert!(o.fatal.is_empty(), "{:?}", o.fatal);
    let svc = o.composed["service"].clone();
    assert_eq!(svc["metadata"]["namespace"], net_ns.as_str());
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    let selector = svc["spec"]["selector"].as_object().unwrap().clone();
    let path = format!("/apis/kubevirt.io/v1/namespaces/{net_ns}/virtualmachineinstances");
    let (_, vmis) = k.request(reqwest::Method::GET, &path, None, None).await;
    let selected: Vec<&str> = vmis["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| selector.iter().all(|(key, val)| &v["metadata"]["labels"][key] == val))
        .filter_map(|v| v["metadata"]["name"].as_str())
        .collect();
    assert_eq!(selected, ["web-1", "web-2"], "the Service selects the launcher pods of its hosts only");
    assert!(!o.ready() && claim_status(&o)["state"] == "PENDING", "{:#}", o.xr);

    // The platform team grows the pool the composition names: MetalLB's
    // controller gives the Service its address.
    vmaas_tests::metallb::pool(&k, "public", "192.0.2.80/28", true).await;
    let address = address_of(&k, &svc).await;
    assert!(address.starts_with("192.0.2.") && !["192.0.2.80", "192.0.2.81"].contains(&address.as_str()), "{address}");
    let o = lb_xp.reconcile_claim("loadbalancers", "xloadbalancers", &lb).await;
    assert!(o.ready(), "{:#}", o.xr);
    let status = claim_status(&o);
    assert_eq!((status["state"].as_str(), status["address"].as_str()), (Some("READY"), Some(address.as_str())), "{status:#}");
    assert_eq!(status["healthyTargets"], json!(["web-1", "web-2"]));
    assert_eq!(o.condition("LoadBalancerReady").unwrap()["status"], "True");

    // KubeVirt stops web-2: its pod goes, and the load balancer says so.
    let web2 = &webs[1].1.composed["vm"];
    let vmi = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "web-2", "namespace": web2["metadata"]["namespace"]}});
    let (st, _) = k.request(reqwest::Method::DELETE, &Cluster::path_of(&vmi, "virtualmachineinstances"), None, None).await;
    assert_eq!(st, 200);
    let o = lb_xp.reconcile_claim("loadbalancers", "xloadbalancers", &lb).await;
    let status = claim_status(&o);
    assert_eq!(status["healthyTargets"], json!(["web-1"]), "{status:#}");
    assert!(status["message"].as_str().unwrap().contains("web-2: not running"), "{status:#}");

    // A load balancer over VMs on two networks is refused, naming the host.
    let mut bad = example("claim-loadbalancer.yaml");
    bad["metadata"]["name"] = json!("across");
    bad["spec"]["hostRefs"] = json!([{"name": "web-1"}, {"name": "alone"}]);
    let alone = applied(&k, &vm_claim("team-a", "alone", json!({})), "virtualmachines", "team-a").await;
    vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &alone).await;
    let bad = applied(&k, &bad, "loadbalancers", "team-a").await;
    let o = lb_xp.reconcile_claim("loadbalancers", "xloadbalancers", &bad).await;
    assert!(o.fatal.len() == 1 && o.fatal[0].contains("spec.hostRefs[1]") && o.fatal[0].contains("same network"), "{:?}", o.fatal);
    assert!(o.composed.is_empty());

    // The subnet is in use: Crossplane refuses to delete it, naming its users.
    let refused = net_xp.delete_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &net).await.unwrap_err();
    assert!(refused.contains("3 usage(s)") && refused.contains("XVirtualMachine/"), "{refused}");
    for c in [&webs[0].0, &webs[1].0, &other] {
        vm_xp.delete_claim("virtualmachines", "xvirtualmachines", c).await.expect("a VM is not in use");
    }
    net_xp.delete_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &net).await.expect("no VM uses the network any more");
    let (st, ns) = k.request(reqwest::Method::GET, &format!("/api/v1/namespaces/{net_ns}"), None, None).await;
    assert!(st == 404 || ns["metadata"]["deletionTimestamp"].is_string(), "the network's namespace goes: {st} {ns:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_outlives_its_vm_and_is_a_hotpluggable_disk() {
    let (k, f, _metallb) = installed().await;
    let net_xp = Crossplane::new(&k, &f, input_of("composition-virtualprivatesubnet.yaml"));
    let vm_xp = Crossplane::new(&k, &f, input_of("composition-virtualmachine.yaml"));
    let vol_xp = Crossplane::new(&k, &f, input_of("composition-volume.yaml"));
    let net = applied(&k, &example("claim-virtualprivatesubnet.yaml"), "virtualprivatesubnets", "team-a").await;
    let o = net_xp.reconcile_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &net).await;
    ovn_created(&k, &o.composed["udn"], "userdefinednetworks").await;
    let net_ns = net_xp.reconcile_claim("virtualprivatesubnets", "xvirtualprivatesubnets", &net).await.xr["status"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();

    // The shipped volume claim: a blank DataVolume in its network's namespace, PENDING until CDI makes it.
    let vol = applied(&k, &example("claim-volume.yaml"), "volumes", "team-a").await;
    let o = vol_xp.reconcile_claim("volumes", "xvolumes", &vol).await;
    assert!(o.fatal.is_empty() && o.warnings.is_empty(), "{:?} {:?}", o.fatal, o.warnings);
    assert_eq!(o.composed.keys().collect::<Vec<_>>(), ["datavolume", "usage"]);
    assert_composed_by(&o);
    let dv = o.composed["datavolume"].clone();
    assert_eq!((dv["metadata"]["namespace"].as_str(), &dv["spec"]["source"]), (Some(net_ns.as_str()), &json!({"blank": {}})));
    assert_eq!(dv["spec"]["storage"]["resources"]["requests"]["storage"], "10Gi");
    assert_eq!(o.composed["usage"]["spec"]["of"]["kind"], "XVirtualPrivateSubnet", "the volume keeps its network");
    assert!(!o.ready() && claim_status(&o)["state"] == "PENDING", "{:#}", o.xr);
    let (st, body) = k.write_status(&dv, "datavolumes", json!({"phase": "Succeeded", "progress": "100.0%"})).await;
    assert_eq!(st, 200, "{body:#}");
    let o = vol_xp.reconcile_claim("volumes", "xvolumes", &vol).await;
    assert!(o.ready() && claim_status(&o)["state"] == "READY", "{:#}", o.xr);
    assert_eq!(o.condition("VolumeReady").unwrap()["status"], "True");
    let serial = claim_status(&o)["serial"].as_str().unwrap().to_owned();
    let volume_xr = o.xr["metadata"]["name"].clone();

    // A VM on the network that lists it: a hotpluggable SCSI disk with the volume's serial, and a usage.
    let web = |volumes: Value| vm_claim("team-a", "web", json!({"network": "example", "expose": [], "volumes": volumes}));
    let c = applied(&k, &web(json!(["data"])), "virtualmachines", "team-a").await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    assert!(o.fatal.is_empty() && o.warnings.is_empty(), "{:?} {:?}", o.fatal, o.warnings);
    let t = &o.composed["vm"]["spec"]["template"]["spec"];
    let disk = t["domain"]["devices"]["disks"].as_array().unwrap().iter().find(|d| d["name"] == "data-vol").cloned();
    assert_eq!(disk, Some(json!({"name": "data-vol", "disk": {"bus": "scsi"}, "serial": serial})), "{t:#}");
    let volume = t["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "data-vol").cloned();
    assert_eq!(volume.unwrap()["dataVolume"], json!({"name": "data-vol", "hotpluggable": true}));
    let usage = &o.composed["usage-volume-data"]["spec"];
    assert_eq!((usage["of"]["kind"].as_str(), &usage["of"]["resourceRef"]["name"]), (Some("XVolume"), &volume_xr));
    let o = vol_xp.reconcile_claim("volumes", "xvolumes", &vol).await;
    assert_eq!(claim_status(&o)["attachedTo"], json!(["web"]));
    let refused = vol_xp.delete_claim("volumes", "xvolumes", &vol).await.unwrap_err();
    assert!(refused.contains("XVirtualMachine/"), "a volume in use is kept: {refused}");

    // Taken off the VM (KubeVirt hot-unplugs it): no disk, no usage.
    let c = applied(&k, &web(json!([])), "virtualmachines", "team-a").await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    assert!(!o.composed["vm"].to_string().contains("data-vol") && !o.composed.contains_key("usage-volume-data"));

    // Back on, then the VM goes: the volume and its DataVolume stay.
    let c = applied(&k, &web(json!(["data"])), "virtualmachines", "team-a").await;
    vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    vm_xp.delete_claim("virtualmachines", "xvirtualmachines", &c).await.expect("a VM is not in use");
    assert_eq!(k.request(reqwest::Method::GET, &Cluster::path_of(&dv, "datavolumes"), None, None).await.0, 200);
    let o = vol_xp.reconcile_claim("volumes", "xvolumes", &vol).await;
    assert!(o.ready() && claim_status(&o)["attachedTo"] == json!([]), "{:#}", o.xr);

    // Refusals: volumes without a named network, a volume on another network, a bad size.
    let c = applied(&k, &vm_claim("team-a", "lonely", json!({"volumes": ["data"]})), "virtualmachines", "team-a").await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    assert!(o.fatal.len() == 1 && o.fatal[0].starts_with("spec.volumes:"), "{:?}", o.fatal);
    let mut other = example("claim-volume.yaml");
    other["metadata"]["name"] = json!("elsewhere");
    other["spec"]["network"] = json!("other");
    let other = applied(&k, &other, "volumes", "team-a").await;
    let o = vol_xp.reconcile_claim("volumes", "xvolumes", &other).await;
    assert!(o.composed.is_empty() && o.warnings.iter().any(|w| w.contains("no VirtualPrivateSubnet \"other\"")), "{:?}", o.warnings);
    let c = applied(&k, &vm_claim("team-a", "mixed", json!({"network": "example", "volumes": ["elsewhere"]})), "virtualmachines", "team-a")
        .await;
    let o = vm_xp.reconcile_claim("virtualmachines", "xvirtualmachines", &c).await;
    assert!(o.fatal.len() == 1 && o.fatal[0].contains("spec.volumes[0]") && o.fatal[0].contains("\"other\""), "{:?}", o.fatal);
    let mut bad = example("claim-volume.yaml");
    bad["metadata"]["name"] = json!("tiny");
    bad["spec"]["size"] = json!("1Ki");
    let bad = applied(&k, &bad, "volumes", "team-a").await;
    let o = vol_xp.reconcile_claim("volumes", "xvolumes", &bad).await;
    assert!(o.fatal.len() == 1 && o.fatal[0].contains("spec.size"), "{:?}", o.fatal);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_instance_type_and_platform_are_objects_of_its_own_that_its_vm_references() {
    let (k, f, _metallb) = installed().await;
    let input = input_of("composition-virtualmachine.yaml");
    let xp = Crossplane::new(&k, &f, input.clone());
    let sized = applied(
        &k,
        &vm_claim("team-a", "sized", json!({"template": "secure", "templateParameters": null, "instanceType": "general.large"})),
        "virtualmachines",
        "team-a",
    )
    .await;
    let o = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &sized).await;
    assert!(o.fatal.is_empty() && o.warnings.is_empty(), "{:?} {:?}", o.fatal, o.warnings);
    assert_composed_by(&o);
    let (vm, it, pref) = (&o.composed["vm"], &o.composed["instancetype"], &o.composed["preference"]);
    assert_eq!((it["kind"].as_str(), pref["kind"].as_str()), (Some("VirtualMachineInstancetype"), Some("VirtualMachinePreference")));
    assert_eq!(vm["spec"]["instancetype"], json!({"kind": "VirtualMachineInstancetype", "name": it["metadata"]["name"]}));
    assert_eq!(vm["spec"]["preference"], json!({"kind": "VirtualMachinePreference", "name": pref["metadata"]["name"]}));
    assert_eq!(it["spec"]["cpu"]["guest"], 4, "{it:#}");
    assert_eq!(pref["spec"]["firmware"]["preferredEfi"], json!({"secureBoot": true, "persistent": true}));
    assert_eq!(pref["spec"]["devices"]["preferredTPM"]["persistent"], true);

    // The template's default type, and seed 001's o1.small: deprecated, and the claim is told.
    let plain =
        applied(&k, &vm_claim("team-a", "plain", json!({"template": "secure", "templateParameters": null})), "virtualmachines", "team-a")
            .await;
    let o = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &plain).await;
    assert_eq!(o.composed["instancetype"]["spec"]["cpu"]["guest"], 2, "general.small, the template's default");
    let seed = applied(
        &k,
        &vm_claim("team-a", "seed", json!({"templateParameters": {"instanceType": "o1.small", "vm_disk_size": "20Gi"}})),
        "virtualmachines",
        "team-a",
    )
    .await;
    let o = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &seed).await;
    assert!(o.warnings.iter().any(|w| w.contains("DEPRECATED") && w.contains("general.small")), "{:?}", o.warnings);
    assert!(o.composed.contains_key("instancetype") && !o.composed.contains_key("preference"), "{:?}", o.composed.keys());

    // An obsolete type composes nothing for a new claim, but a VM that has it keeps it.
    let old = applied(
        &k,
        &vm_claim("team-b", "old", json!({"instanceType": "m1.tiny", "templateParameters": null})),
        "virtualmachines",
        "team-b",
    )
    .await;
    let o = xp.reconcile_claim("virtualmachines", "xvirtualmachines", &old).await;
    assert!(o.fatal.len() == 1 && o.fatal[0].contains("spec.instanceType") && o.fatal[0].contains("OBSOLETE"), "{:?}", o.fatal);
    assert!(o.composed.is_empty(), "{:?}", o.composed.keys());
    let mut retired = input;
    for t in retired["instanceTypes"].as_array_mut().unwrap() {
        if t["name"] == "general.large" {
            t["spec"]["state"] = json!("INSTANCE_TYPE_STATE_OBSOLETE");
        }
    }
    let o = Crossplane::new(&k, &f, retired).reconcile_claim("virtualmachines", "xvirtualmachines", &sized).await;
    assert!(o.fatal.is_empty() && o.composed.contains_key("vm"), "a VM keeps the type it has: {:?}", o.fatal);
}
