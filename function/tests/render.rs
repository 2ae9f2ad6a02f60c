//! Rendering checked against the upstream schemas in `../shared/schemas`
//! (JSON Schema validation, plus the UDN CEL rules by hand).

use std::path::PathBuf;

use serde_json::{Value, json};
use vmaas_function::xr::{FunctionInput, NetworkXrSpec, VmXrSpec, render_network, render_vm};
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
    let xr = example("xr-virtualmachine.yaml");
    let spec: VmXrSpec = serde_json::from_value(xr["spec"].clone()).unwrap();
    let r = render_vm("myvm", &spec, &template(&input, "simple_vm"), &input).unwrap();

    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    assert_eq!(vm["apiVersion"], "kubevirt.io/v1");
    assert_eq!(vm["metadata"]["namespace"], "vmaas-myvm");
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

    let ns = serde_json::to_value(r.namespace.as_ref().unwrap()).unwrap();
    assert_eq!(ns["metadata"]["labels"]["k8s.ovn.org/primary-user-defined-network"], "");

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
    let r = render_vm("plain", &spec, &template(&input, "simple_vm"), &input).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    assert_valid(&json_schema("kubevirt.io_virtualmachine_v1.json"), &vm, "the KubeVirt VirtualMachine");
    assert_eq!(vm["spec"]["runStrategy"], "Halted");
    assert_eq!(vm["spec"]["template"]["spec"]["domain"]["memory"]["guest"], "8Gi", "a bare value is accepted");
    assert!(vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0].get("masquerade").is_some());
    assert!(r.udn.is_none());
}

#[test]
fn bad_parameters_give_the_servers_messages() {
    let input = input();
    let spec: VmXrSpec =
        serde_json::from_value(json!({"template": "simple_vm", "templateParameters": {"vm_memory": {"value": "4GB"}, "vm_colour": "red"}}))
            .unwrap();
    let errs = render_vm("bad", &spec, &template(&input, "simple_vm"), &input).unwrap_err().to_string();
    assert!(errs.contains("spec.templateParameters.vm_colour: unknown parameter \"vm_colour\"; valid parameters are: vm_cpu_cores, vm_disk_size, vm_memory"), "{errs}");
    assert!(errs.contains("spec.templateParameters.vm_memory.value: \"4GB\" has an unknown suffix \"GB\""), "{errs}");
}

#[test]
fn networks_render_valid_udn_and_localnet_cudn() {
    let spec: NetworkXrSpec = serde_json::from_value(example("xr-virtualprivatenetwork.yaml")["spec"].clone()).unwrap();
    let n = render_network("example", &spec);
    let udn = serde_json::to_value(n.udn.as_ref().unwrap()).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_userdefinednetworks.yaml"), &udn, "the UserDefinedNetwork");
    check_udn_cel(&udn);
    assert_eq!(udn["metadata"]["namespace"], "vmaas-net-example");

    let local: NetworkXrSpec = serde_json::from_value(json!({"ipv4Cidr": "192.168.50.0/24", "localnet": "physnet1"})).unwrap();
    let n = render_network("lab", &local);
    let cudn = serde_json::to_value(n.cudn.as_ref().unwrap()).unwrap();
    assert_valid(&crd_schema("k8s.ovn.org_clusteruserdefinednetworks.yaml"), &cudn, "the ClusterUserDefinedNetwork");
    assert_eq!(cudn["spec"]["network"]["topology"], "Localnet");
    assert!(is_cidr(cudn["spec"]["network"]["localnet"]["subnets"][0].as_str().unwrap()));
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
    let mut vm = serde_json::to_value(render_vm("x", &spec, &template(&input, "simple_vm"), &input).unwrap().vm).unwrap();
    vm["spec"]["runStrategy"] = json!(5);
    vm["spec"]["template"]["spec"]["domain"]["devices"]["gpus"] = json!([{"deviceName": "nvidia.com/A10"}]);
    let validator = jsonschema::validator_for(&json_schema("kubevirt.io_virtualmachine_v1.json")).unwrap();
    assert!(validator.iter_errors(&vm).count() >= 2, "a number runStrategy and a GPU without a name are refused");
    let mut udn =
        serde_json::to_value(render_network("n", &serde_json::from_value(json!({"ipv4Cidr": "10.0.0.0/8"})).unwrap()).udn.unwrap())
            .unwrap();
    udn["spec"]["topology"] = json!("Mesh");
    assert!(!jsonschema::validator_for(&crd_schema("k8s.ovn.org_userdefinednetworks.yaml")).unwrap().is_valid(&udn));
}

/// Every object kind, as rendered for the examples; the snapshots in
/// tests/snapshots were reviewed by hand.
#[test]
fn snapshots_of_every_object_kind() {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(example("xr-virtualmachine.yaml")["spec"].clone()).unwrap();
    let r = render_vm("myvm", &spec, &template(&input, "simple_vm"), &input).unwrap();
    insta::assert_json_snapshot!("kubevirt_virtualmachine", r.vm);
    insta::assert_json_snapshot!("namespace", r.namespace.unwrap());
    insta::assert_json_snapshot!("userdefinednetwork", r.udn.unwrap());
    insta::assert_json_snapshot!("loadbalancer_service", r.service.unwrap());
    let local: NetworkXrSpec = serde_json::from_value(json!({"ipv4Cidr": "192.168.50.0/24", "localnet": "physnet1"})).unwrap();
    insta::assert_json_snapshot!("clusteruserdefinednetwork", render_network("lab", &local).cudn.unwrap());
}

#[test]
fn crossplane_s_own_xr_fields_are_accepted() {
    // Crossplane v2 writes spec.crossplane on every XR; v1 claims' XRs carry compositionRef & co.
    let mut xr = example("xr-virtualmachine.yaml");
    xr["spec"]["crossplane"] =
        serde_json::json!({"compositionRef": {"name": "vm"}, "resourceRefs": [], "compositionUpdatePolicy": "Automatic"});
    xr["spec"]["compositionRef"] = serde_json::json!({"name": "vm"});
    xr["spec"]["resourceRefs"] = serde_json::json!([]);
    let spec = VmXrSpec::from_xr(&xr["spec"]).expect("Crossplane's fields are accepted");
    let input = input();
    assert!(render_vm("myvm", &spec, &template(&input, &spec.template), &input).is_ok());
    // A misspelt field of ours is still refused.
    xr["spec"]["tempalte"] = serde_json::json!("x");
    let err = VmXrSpec::from_xr(&xr["spec"]).unwrap_err().to_string();
    assert!(err.contains("tempalte"), "{err}");
}

#[test]
fn names_too_long_for_kubernetes_are_caught() {
    let input = input();
    let spec = VmXrSpec::from_xr(&example("xr-virtualmachine.yaml")["spec"]).unwrap();
    let ok = render_vm(&"a".repeat(40), &spec, &template(&input, "simple_vm"), &input).unwrap();
    assert_eq!(ok.too_long(), None, "{:?}", ok.names());
    // A valid DNS label of 60 characters still makes `vmaas-<name>` and `<name>-floating-ip` too long.
    let long = render_vm(&"b".repeat(60), &spec, &template(&input, "simple_vm"), &input).unwrap();
    let name = long.too_long().expect("a derived name over 63 characters");
    assert!(name.len() > 63 && name.contains(&"b".repeat(60)), "{name}");
}
