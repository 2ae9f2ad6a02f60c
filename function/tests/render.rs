//! Rendering checked against the upstream schemas in `../shared/schemas`
//! (JSON Schema validation, plus the UDN CEL rules by hand).

use std::path::PathBuf;

use serde_json::{Value, json};
use vmaas_function::render::{
    network_namespace, render_network, render_physical, render_secondary, render_vm, subnet_network_name, vm_namespace,
};
use vmaas_function::xr::{FunctionInput, NetworkRole, NetworkXrSpec, Owner, PhysicalNetworkXrSpec, VmXrSpec};
use vmaas_model::k8s::observe::vm_phase;
use vmaas_model::{Phase, Template};

fn shared() -> PathBuf {
    let p = std::env::var_os("VMAAS_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    assert!(p.join("schemas").exists(), "the upstream schemas are missing at {}/schemas", p.display());
    p
}

fn json_schema(file: &str) -> Value {
    serde_json::from_slice(&std::fs::read(shared().join("schemas").join(file)).unwrap()).unwrap()
}

/// The openAPIV3Schema of a CRD file.
fn crd_schema(file: &str) -> Value {
    let text = std::fs::read_to_string(shared().join("schemas").join(file)).unwrap();
    let crd: Value = serde_norway::from_str(&text).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn assert_valid(schema: &Value, object: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{what}: bad schema: {e}"));
    let errors: Vec<String> = validator.iter_errors(object).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "{what} does not match its schema:\n{}\n{object:#}", errors.join("\n"));
}

fn example(file: &str) -> Value {
    let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/compositions").join(file)).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// The owner of team-a's claim `name`.
fn team_a(name: &str) -> Owner {
    Owner { tenant: "team-a".into(), name: name.into() }
}

fn input() -> FunctionInput {
    serde_json::from_value(example("input.yaml")).unwrap()
}

fn template(input: &FunctionInput, id: &str) -> Template {
    Template::compile(input.templates.iter().find(|t| t.id == id).unwrap().clone()).unwrap()
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, len)) = s.split_once('/') else { return false };
    let Ok(len) = len.parse::<u8>() else { return false };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => len <= 32,
        Ok(std::net::IpAddr::V6(_)) => len <= 128,
        Err(_) => false,
    }
}

/// The CEL rules of the UserDefinedNetwork CRD that a JSON Schema validator skips.
fn check_udn_cel(udn: &Value) {
    let spec = &udn["spec"];
    let topology = spec["topology"].as_str().unwrap();
    // spec: topology Layer2 requires layer2 (and Layer3 layer3).
    assert_eq!(topology == "Layer2", spec.get("layer2").is_some(), "spec.layer2 is required when topology is Layer2");
    let l2 = &spec["layer2"];
    for s in l2["subnets"].as_array().unwrap() {
        assert!(is_cidr(s.as_str().unwrap()), "CIDR is invalid: {s}");
    }
    // lifecycle Persistent is only supported when ipam.mode is Enabled.
    let ipam = &l2["ipam"];
    if ipam["lifecycle"] == "Persistent" {
        assert!(ipam.get("mode").is_none() || ipam["mode"] == "Enabled");
    }
    // Primary networks need subnets unless IPAM is disabled.
    if l2["role"] == "Primary" {
        assert!(!l2["subnets"].as_array().unwrap().is_empty());
    }
}

#[test]
fn seed_vm_renders_valid_objects() {
    let input = input();
    let xr = example("claim-virtualmachine.yaml");
    let spec: VmXrSpec = serde_json::from_value(xr["spec"].clone()).unwrap();
    let r = render_vm(&team_a("myvm"), &spec, &template(&input, "simple_vm"), &input, None).unwrap();

    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    assert_eq!(vm["apiVersion"], "kubevirt.io/v1");
    assert_eq!(vm["metadata"]["namespace"], vm_namespace(&team_a("myvm")), "in a namespace of its own");
    assert!(r.namespace_name.starts_with("vmaas-team-a-myvm-"), "{}", r.namespace_name);
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    let vmi = &vm["spec"]["template"]["spec"];
    assert_eq!(vmi["domain"]["cpu"]["cores"], 4);
    assert_eq!(vmi["domain"]["memory"]["guest"], "4Gi", "as written");
    assert_eq!(vmi["evictionStrategy"], "LiveMigrateIfPossible");
    assert_eq!(vmi["domain"]["devices"]["interfaces"][0]["binding"]["name"], "l2bridge", "primary UDN binding");
    assert_eq!(vmi["readinessProbe"]["tcpSocket"]["port"], 22);
    assert!(vmi["volumes"][1]["cloudInitNoCloud"]["userData"].as_str().unwrap().contains("ssh-ed25519"));
    let dv = &vm["spec"]["dataVolumeTemplates"][0];
    assert_eq!(dv["spec"]["sourceRef"], json!({"kind": "DataSource", "name": "rhel9", "namespace": "openshift-virtualization-os-images"}));
    assert_eq!(dv["spec"]["storage"]["resources"]["requests"]["storage"], "30Gi");
    let datavolume = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": dv["metadata"], "spec": dv["spec"]});
    assert_valid(&json_schema("cdi.kubevirt.io_datavolume_v1beta1.json"), &datavolume, "the CDI DataVolume template");

    let udn = serde_json::to_value(r.udn.as_ref().unwrap()).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_userdefinednetworks.yaml"), &udn, "the UserDefinedNetwork");
    check_udn_cel(&udn);
    assert_eq!(udn["spec"]["layer2"]["subnets"], json!(["10.200.0.0/16"]));
    assert_eq!(udn["metadata"], json!({"name": "myvm", "namespace": r.namespace_name}));

    let ns = serde_json::to_value(r.namespace.as_ref().unwrap()).unwrap();
    assert_eq!(ns["metadata"]["labels"]["k8s.ovn.org/primary-user-defined-network"], "");
    assert_eq!(ns["metadata"]["labels"]["vmaas.io/tenant"], "team-a");

    let svc = serde_json::to_value(r.service.as_ref().unwrap()).unwrap();
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
    assert_eq!(svc["spec"]["selector"]["vmaas.io/vm"], "myvm");
    assert_eq!(vmi.get("metadata"), None);
    assert_eq!(
        vm["spec"]["template"]["metadata"]["labels"]["vmaas.io/vm"], "myvm",
        "the launcher pod carries the label the Service selects"
    );
    assert_eq!(svc["metadata"]["annotations"]["metallb.io/address-pool"], "public");
    let ports: Vec<i64> = svc["spec"]["ports"].as_array().unwrap().iter().map(|p| p["port"].as_i64().unwrap()).collect();
    assert_eq!(ports, [22, 80]);
}

#[test]
fn stopped_vm_without_network_uses_the_pod_network() {
    let input = input();
    let spec: VmXrSpec =
        serde_json::from_value(json!({"template": "simple_vm", "state": "stopped", "templateParameters": {"vm_memory": "8Gi"}})).unwrap();
    let r = render_vm(&team_a("plain"), &spec, &template(&input, "simple_vm"), &input, None).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    assert_eq!(vm["spec"]["runStrategy"], "Halted");
    assert_eq!(vm["spec"]["template"]["spec"]["domain"]["memory"]["guest"], "8Gi", "a bare value is accepted");
    assert!(vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0].get("masquerade").is_some());
    assert_eq!(vm["spec"]["template"]["spec"]["networks"].as_array().unwrap().len(), 1, "only the pod network");
    assert!(r.udn.is_none());
}

/// `simple_vm` with its image given as `image` (a name or a URL).
fn simple_vm_with_image(input: &FunctionInput, image: &str) -> Result<Template, vmaas_model::ValidationErrors> {
    let mut wire = input.templates.iter().find(|t| t.id == "simple_vm").unwrap().clone();
    wire.spec_defaults.image = Some(image.into());
    Template::compile(wire)
}

#[test]
fn an_image_url_or_registry_reference_is_imported_by_cdi_and_other_schemes_are_refused() {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(json!({"template": "simple_vm"})).unwrap();
    let url = "https://images.example/debian-12.qcow2";
    let r = render_vm(&team_a("fromurl"), &spec, &simple_vm_with_image(&input, url).unwrap(), &input, None).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    let dv = &vm["spec"]["dataVolumeTemplates"][0];
    assert_eq!(dv["spec"]["source"], json!({"http": {"url": url}}));
    assert!(dv["spec"].get("sourceRef").is_none(), "{dv}");
    let datavolume = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": dv["metadata"], "spec": dv["spec"]});
    assert_valid(&json_schema("cdi.kubevirt.io_datavolume_v1beta1.json"), &datavolume, "the CDI DataVolume template");
    // A containerDisk in an OCI registry: CDI's registry source.
    let reference = "docker://127.0.0.1:5000/disks/debian:12";
    let r = render_vm(&team_a("fromoci"), &spec, &simple_vm_with_image(&input, reference).unwrap(), &input, None).unwrap();
    let dv = serde_json::to_value(&r.vm).unwrap()["spec"]["dataVolumeTemplates"][0].clone();
    assert_eq!(dv["spec"]["source"], json!({"registry": {"url": reference}}));
    let datavolume = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": dv["metadata"], "spec": dv["spec"]});
    assert_valid(&json_schema("cdi.kubevirt.io_datavolume_v1beta1.json"), &datavolume, "the CDI DataVolume template (registry)");
    let errs = simple_vm_with_image(&input, "file:///etc/shadow").unwrap_err().to_string();
    assert!(errs.contains("spec_defaults.image: an image URL must be http or https, got \"file\""), "{errs}");
    let errs = simple_vm_with_image(&input, "docker://127.0.0.1:5000/Disks/x:1").unwrap_err().to_string();
    assert!(errs.contains("spec_defaults.image: \"docker://127.0.0.1:5000/Disks/x:1\" is not an OCI image reference"), "{errs}");
}

#[test]
fn bad_parameters_give_the_servers_messages() {
    let input = input();
    let spec: VmXrSpec =
        serde_json::from_value(json!({"template": "simple_vm", "templateParameters": {"vm_memory": {"value": "4GB"}, "vm_colour": "red"}}))
            .unwrap();
    let errs = render_vm(&team_a("bad"), &spec, &template(&input, "simple_vm"), &input, None).unwrap_err().to_string();
    assert!(errs.contains("spec.templateParameters.vm_colour: unknown parameter \"vm_colour\"; valid parameters are: vm_cpu_cores, vm_disk_size, vm_memory"), "{errs}");
    assert!(errs.contains("spec.templateParameters.vm_memory.value: \"4GB\" has an unknown suffix \"GB\""), "{errs}");
}

fn physical(spec: Value) -> PhysicalNetworkXrSpec {
    PhysicalNetworkXrSpec::from_xr(&spec).unwrap()
}

#[test]
fn networks_render_valid_udn_and_localnet_cudn() {
    let spec: NetworkXrSpec = serde_json::from_value(example("claim-virtualprivatesubnet.yaml")["spec"].clone()).unwrap();
    let n = render_network(&team_a("example"), &spec).unwrap();
    let udn = serde_json::to_value(&n.udn).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_userdefinednetworks.yaml"), &udn, "the UserDefinedNetwork");
    check_udn_cel(&udn);
    assert_eq!(udn["metadata"], json!({"name": "example", "namespace": network_namespace("team-a", "example")}));
    assert_eq!(n.namespace.metadata.name, Some(network_namespace("team-a", "example")));
    assert_eq!(udn["spec"]["layer2"]["role"], "Primary");

    let lab = physical(example("xr-physicalnetwork.yaml")["spec"].clone());
    let cudn = serde_json::to_value(render_physical("lab", &lab).unwrap()).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_clusteruserdefinednetworks.yaml"), &cudn, "the ClusterUserDefinedNetwork");
    assert_eq!(cudn["spec"]["network"]["topology"], "Localnet");
    assert_eq!(cudn["metadata"].get("namespace"), None, "cluster-scoped");
    assert!(is_cidr(cudn["spec"]["network"]["localnet"]["subnets"][0].as_str().unwrap()));
    let bring_your_own = physical(json!({"physicalNetworkName": "physnet1", "namespaces": ["team-a", "team-b"]}));
    let cudn = serde_json::to_value(render_physical("dc", &bring_your_own).unwrap()).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_clusteruserdefinednetworks.yaml"), &cudn, "a localnet without IPAM");
}

#[test]
fn bad_networks_name_their_fields() {
    let bad = NetworkXrSpec { ipv4_cidr: "10.0.0.1/8".into(), role: NetworkRole::Primary, topology: Default::default() };
    let e = render_network(&team_a("n"), &bad).unwrap_err().to_string();
    assert!(e.contains("spec.ipv4Cidr") && e.contains("host bits"), "{e}");
    let e =
        render_physical("p", &physical(json!({"physicalNetworkName": "a:b", "ipv4Cidr": "nope", "vlan": 5000, "namespaces": ["Team_A"]})))
            .unwrap_err()
            .to_string();
    for field in ["spec.physicalNetworkName", "spec.ipv4Cidr", "spec.vlan", "spec.namespaces[0]"] {
        assert!(e.contains(field), "{field} in {e}");
    }
    assert!(render_physical("p", &physical(json!({"physicalNetworkName": "x", "namespaces": []}))).is_err());
    let input = input();
    let spec: VmXrSpec =
        serde_json::from_value(json!({"template": "simple_vm", "network": "10.0.0.0/33", "physicalNetwork": "No"})).unwrap();
    let e = render_vm(&team_a("v"), &spec, &template(&input, "simple_vm"), &input, None).unwrap_err().to_string();
    assert!(e.contains("spec.network") && e.contains("spec.physicalNetwork"), "{e}");
}

#[test]
fn a_vm_on_a_named_network_lives_in_its_namespace_and_a_physical_one_is_a_second_nic() {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(json!({"template": "simple_vm", "network": "example", "physicalNetwork": "lab"})).unwrap();
    let r = render_vm(&team_a("two"), &spec, &template(&input, "simple_vm"), &input, None).unwrap();
    assert!(r.udn.is_none() && r.namespace.is_none(), "the named network's XR owns both");
    assert_eq!(r.namespace_name, network_namespace("team-a", "example"));
    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    assert_eq!(
        vm["spec"]["template"]["spec"]["networks"],
        json!([{"name": "default", "pod": {}}, {"name": "lab", "multus": {"networkName": "lab"}}])
    );
    // The same network name of another team is another namespace.
    assert_ne!(network_namespace("team-b", "example"), r.namespace_name);
}

#[test]
fn a_secondary_network_is_a_cudn_over_the_team_and_a_nic_of_each_vm_that_lists_it() {
    let spec = NetworkXrSpec::from_xr(&json!({"ipv4Cidr": "10.60.0.0/24", "role": "Secondary"})).unwrap();
    let cudn = serde_json::to_value(render_secondary(&team_a("backend"), &spec).unwrap()).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_clusteruserdefinednetworks.yaml"), &cudn, "the secondary ClusterUserDefinedNetwork");
    assert_eq!(cudn["metadata"]["name"], subnet_network_name("team-a", "backend"));
    assert_eq!(
        cudn["spec"]["network"],
        json!({"topology": "Layer2", "layer2": {"role": "Secondary", "subnets": ["10.60.0.0/24"], "ipam": {"lifecycle": "Persistent"}}})
    );
    assert_eq!(cudn["spec"]["namespaceSelector"]["matchExpressions"][0]["values"], json!(["team-a"]));
    assert_ne!(subnet_network_name("team-b", "backend"), subnet_network_name("team-a", "backend"), "teams never share one");
    for role in ["Primary", "Secondary"] {
        let layer3 = NetworkXrSpec::from_xr(&json!({"ipv4Cidr": "10.200.0.0/16", "role": role, "topology": "Layer3"})).unwrap();
        let e = match role {
            "Primary" => render_network(&team_a("routed"), &layer3).map(|_| ()),
            _ => render_secondary(&team_a("routed"), &layer3).map(|_| ()),
        };
        let e = e.unwrap_err().to_string();
        assert!(e.contains("spec.topology") && e.contains("hostSubnet") && e.contains("use Layer2"), "{e}");
    }

    let input = input();
    let vm = json!({"template": "simple_vm", "network": "example", "physicalNetwork": "lab", "subnets": ["backend", "db"]});
    let r = render_vm(&team_a("web"), &serde_json::from_value(vm).unwrap(), &template(&input, "simple_vm"), &input, None).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    let nets = &vm["spec"]["template"]["spec"]["networks"];
    assert_eq!(nets[1], json!({"name": "lab", "multus": {"networkName": "lab"}}), "the physical NIC first");
    assert_eq!(nets[2], json!({"name": "sub0", "multus": {"networkName": subnet_network_name("team-a", "backend")}}));
    assert_eq!(nets[3], json!({"name": "sub1", "multus": {"networkName": subnet_network_name("team-a", "db")}}));
    let ifaces: Vec<&str> = vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(ifaces, ["default", "lab", "sub0", "sub1"]);

    let bad =
        json!({"template": "simple_vm", "network": "example", "subnets": ["backend", "backend", "example", "No", "a", "b", "c", "d", "e"]});
    let e = render_vm(&team_a("web"), &serde_json::from_value(bad).unwrap(), &template(&input, "simple_vm"), &input, None)
        .unwrap_err()
        .to_string();
    for (field, why) in [
        ("spec.subnets:", "at most 8"),
        ("spec.subnets[1]", "listed twice"),
        ("spec.subnets[2]", "own network"),
        ("spec.subnets[3]", "not a network's name"),
    ] {
        assert!(e.contains(field) && e.contains(why), "{field} ({why}) in {e}");
    }
}

#[test]
fn volumes_render_valid_data_volumes_and_hotpluggable_disks() {
    use vmaas_model::k8s::volume::{ImageSources, VolumeDisk, attach, data_volume};
    let input = input();
    let sources = ImageSources { data_source_namespace: input.data_source_namespace.clone(), storage_class: Some("fast".into()) };
    for spec in [
        json!({"size": "10Gi"}),
        json!({"size": "20Gi", "source_image": "fedora"}),
        json!({"size": "5Gi", "source_image": "https://example.com/a.img"}),
    ] {
        let dv = serde_json::to_value(data_volume("data", "ns1", &serde_json::from_value(spec.clone()).unwrap(), &sources)).unwrap();
        assert_valid(&json_schema("cdi.kubevirt.io_datavolume_v1beta1.json"), &dv, &format!("the DataVolume of {spec}"));
        assert_eq!(dv["spec"]["storage"]["storageClassName"], "fast");
    }
    let spec: VmXrSpec = serde_json::from_value(json!({"template": "simple_vm", "network": "example", "volumes": ["data"]})).unwrap();
    let mut r = render_vm(&team_a("web"), &spec, &template(&input, "simple_vm"), &input, None).unwrap();
    attach(&mut r.vm, &[VolumeDisk { volume: "data".into(), serial: "datax1".into() }]);
    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "a KubeVirt VirtualMachine with a hotpluggable volume");
    let dvs = serde_json::to_value(&r.vm.spec.data_volume_templates).unwrap();
    assert!(!dvs.to_string().contains("data-vol"), "a volume is no template of the VM's: it outlives the VM: {dvs}");
}

#[test]
fn kubevirt_status_maps_to_phases() {
    assert_eq!(vm_phase(None, true), Phase::Absent);
    assert_eq!(vm_phase(Some(&json!({"status": {"ready": true, "printableStatus": "Running"}})), true), Phase::Ready);
    assert_eq!(vm_phase(Some(&json!({"status": {"printableStatus": "Stopped"}})), false), Phase::Stopped);
    assert!(matches!(vm_phase(Some(&json!({"status": {"printableStatus": "Starting"}})), true), Phase::Starting(_)));
    assert!(matches!(vm_phase(Some(&json!({"status": {"printableStatus": "ErrorUnschedulable"}})), true), Phase::Failed(_)));
}

#[test]
fn the_schema_check_catches_bad_objects() {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(json!({"template": "simple_vm"})).unwrap();
    let mut vm = serde_json::to_value(render_vm(&team_a("x"), &spec, &template(&input, "simple_vm"), &input, None).unwrap().vm).unwrap();
    vm["spec"]["runStrategy"] = json!(5);
    vm["spec"]["template"]["spec"]["domain"]["devices"]["gpus"] = json!([{"deviceName": "nvidia.com/A10"}]);
    let validator = jsonschema::validator_for(&json_schema("kubevirt.io_virtualmachine_v1.json")).unwrap();
    assert!(validator.iter_errors(&vm).count() >= 2, "a number runStrategy and a GPU without a name are refused");
    let mut udn = serde_json::to_value(
        render_network(
            &team_a("n"),
            &NetworkXrSpec { ipv4_cidr: "10.0.0.0/8".into(), role: NetworkRole::Primary, topology: Default::default() },
        )
        .unwrap()
        .udn,
    )
    .unwrap();
    udn["spec"]["topology"] = json!("Mesh");
    assert!(!jsonschema::validator_for(&crd_schema("k8s.ovn.org_userdefinednetworks.yaml")).unwrap().is_valid(&udn));
}

/// Every object kind, as rendered for the examples; the snapshots in
/// tests/snapshots were reviewed by hand.
#[test]
fn snapshots_of_every_object_kind() {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(example("claim-virtualmachine.yaml")["spec"].clone()).unwrap();
    let r = render_vm(&team_a("myvm"), &spec, &template(&input, "simple_vm"), &input, None).unwrap();
    insta::assert_json_snapshot!("kubevirt_virtualmachine", r.vm);
    insta::assert_json_snapshot!("namespace", r.namespace.unwrap());
    insta::assert_json_snapshot!("userdefinednetwork", r.udn.unwrap());
    insta::assert_json_snapshot!("loadbalancer_service", r.service.unwrap());
    let lab = physical(example("xr-physicalnetwork.yaml")["spec"].clone());
    insta::assert_json_snapshot!("clusteruserdefinednetwork", render_physical("lab", &lab).unwrap());
}

#[test]
fn crossplane_s_own_xr_fields_are_accepted() {
    // Crossplane v2 writes spec.crossplane on every XR; v1 claims' XRs carry compositionRef & co.
    let mut xr = example("claim-virtualmachine.yaml");
    xr["spec"]["crossplane"] =
        serde_json::json!({"compositionRef": {"name": "vm"}, "resourceRefs": [], "compositionUpdatePolicy": "Automatic"});
    xr["spec"]["compositionRef"] = serde_json::json!({"name": "vm"});
    xr["spec"]["resourceRefs"] = serde_json::json!([]);
    let spec = VmXrSpec::from_xr(&xr["spec"]).expect("Crossplane's fields are accepted");
    let input = input();
    assert!(render_vm(&team_a("myvm"), &spec, &template(&input, &spec.template), &input, None).is_ok());
    // A misspelt field of ours is still refused.
    xr["spec"]["tempalte"] = serde_json::json!("x");
    let err = VmXrSpec::from_xr(&xr["spec"]).unwrap_err().to_string();
    assert!(err.contains("tempalte"), "{err}");
}

#[test]
fn every_derived_name_fits_and_names_of_two_long_vms_differ() {
    let input = input();
    let spec = VmXrSpec::from_xr(&example("claim-virtualmachine.yaml")["spec"]).unwrap();
    let names = |vm: &str| {
        let r = render_vm(&team_a(vm), &spec, &template(&input, "simple_vm"), &input, None).unwrap();
        let mut n = vec![r.namespace_name.clone(), r.vm.metadata.name.clone().unwrap()];
        n.extend(r.vm.spec.data_volume_templates.iter().filter_map(|d| d.metadata.name.clone()));
        n.extend(r.udn.iter().filter_map(|u| u.metadata.name.clone()));
        n.extend(r.service.iter().filter_map(|s| s.metadata.name.clone()));
        n
    };
    assert_eq!(names("myvm")[1..], ["myvm", "myvm-root", "myvm", "myvm-floating-ip"], "short names stay readable");
    let a = names(&format!("{}a", "v".repeat(62)));
    let b = names(&format!("{}b", "v".repeat(62)));
    for n in a.iter().chain(&b) {
        assert!(n.len() <= 63 && vmaas_model::validation::check_dns_label(n).is_ok(), "{n}");
    }
    for (x, y) in a.iter().zip(&b) {
        assert_ne!(x, y, "two VMs whose names share a long prefix get different objects");
    }
}

#[test]
fn an_xr_belongs_to_its_claim_or_to_the_platform_team() {
    let claimed = json!({"metadata": {"name": "myvm-x7k2p",
        "labels": {"crossplane.io/claim-namespace": "team-a", "crossplane.io/claim-name": "myvm"}}});
    assert_eq!(Owner::of(&claimed), team_a("myvm"));
    let direct = json!({"metadata": {"name": "shared-runner"}});
    assert_eq!(Owner::of(&direct), Owner { tenant: String::new(), name: "shared-runner".into() });
    assert_ne!(vm_namespace(&Owner::of(&direct)), vm_namespace(&team_a("shared-runner")));
}
