//! Seed 002's three VMs ("Virtualization on an ACP": a RHEL 9 server on EFI
//! with SMM, a Windows 10 desktop and a Windows Server 2019 with a data
//! disk, the Windows ones bridged onto VLAN 2003), written as vmaas claims
//! of vmaas templates (`examples/seed-002/`), render to KubeVirt
//! VirtualMachines that match the seed's on every field the model covers.
//! The seed's YAML is read from `../shared/seeds/`.

use std::path::PathBuf;

use serde_json::Value;
use vmaas_function::render::render_vm;
use vmaas_function::xr::{FunctionInput, Owner, VmXrSpec};
use vmaas_model::{Template, VirtualMachineTemplate};

fn shared() -> PathBuf {
    std::env::var_os("VMAAS_SHARED").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter(|d| d.lines().any(|l| !l.trim().is_empty() && !l.trim().starts_with('#')))
        .map(|d| serde_norway::from_str(d).unwrap())
        .collect()
}

/// The seed's VirtualMachines, from the YAML blocks of seed 002.
fn seed_vms() -> Vec<Value> {
    let dir = shared().join("seeds");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("002_"))
        .expect("seed 002");
    let text = std::fs::read_to_string(file).unwrap();
    let blocks = text.split("```yaml").skip(1).filter_map(|b| b.split("```").next());
    // Each block is one document (its `#` lines are YAML comments).
    let vms: Vec<Value> =
        blocks.filter_map(|b| serde_norway::from_str::<Value>(b).ok()).filter(|d| d["kind"] == "VirtualMachine").collect();
    vms
}

fn example(file: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(file)).unwrap()
}

/// vCPUs: cores × sockets × threads.
fn vcpus(cpu: &Value) -> u64 {
    ["cores", "sockets", "threads"].iter().map(|k| cpu[k].as_u64().unwrap_or(1)).product()
}

/// What the model covers of a VirtualMachine, in one comparable value.
fn covered(vm: &Value) -> Value {
    let t = &vm["spec"]["template"]["spec"];
    let d = &t["domain"];
    let dvs = vm["spec"]["dataVolumeTemplates"].as_array().cloned().unwrap_or_default();
    let size = |dv: &Value| dv["spec"]["storage"]["resources"]["requests"]["storage"].as_str().unwrap_or_default().to_owned();
    let blank: Vec<String> = dvs.iter().filter(|dv| dv["spec"]["source"].get("blank").is_some()).map(size).collect();
    let efi = d["firmware"]["bootloader"].get("efi");
    let bridged = d["devices"]["interfaces"].as_array().into_iter().flatten().filter(|i| i.get("bridge").is_some()).count();
    let running = vm["spec"]["running"] == true || vm["spec"]["runStrategy"] == "Always";
    serde_json::json!({
        "vcpus": vcpus(&d["cpu"]),
        "memory": d["memory"]["guest"],
        "root_disk": dvs.first().map(size),
        "data_disks": blank,
        "efi": efi.is_some(),
        // KubeVirt's default for an EFI bootloader is Secure Boot on.
        "secure_boot": efi.is_some_and(|e| e["secureBoot"].as_bool().unwrap_or(true)),
        "smm": d["features"]["smm"]["enabled"].as_bool().unwrap_or(d["features"].get("smm").is_some()),
        "hyperv_spinlocks": d["features"]["hyperv"]["spinlocks"]["spinlocks"],
        "bridged_nics": bridged,
        "running": running,
    })
}

#[test]
fn seed_002_s_vms_render_as_the_seed_writes_them() {
    let mut input: FunctionInput =
        serde_json::from_value(serde_norway::from_str::<Value>(&example("compositions/input.yaml")).unwrap()).unwrap();
    input.templates = documents(&example("seed-002/templates.yaml"))
        .into_iter()
        .map(|t| serde_json::from_value::<VirtualMachineTemplate>(t).unwrap())
        .collect();
    let claims = documents(&example("seed-002/claims.yaml"));
    let seed = seed_vms();
    assert_eq!((seed.len(), claims.len()), (3, 3), "three VMs in the seed and in the example");
    let schema: Value =
        serde_json::from_slice(&std::fs::read(shared().join("schemas/kubevirt.io_virtualmachine_v1.json")).unwrap()).unwrap();
    let schema = jsonschema::validator_for(&schema).unwrap();
    for claim in claims {
        let name = claim["metadata"]["name"].as_str().unwrap();
        let want = seed.iter().find(|s| s["metadata"]["name"] == name).unwrap_or_else(|| panic!("seed 002 has {name}"));
        let spec: VmXrSpec = serde_json::from_value(claim["spec"].clone()).unwrap();
        let wire = input.templates.iter().find(|t| t.id == spec.template).unwrap().clone();
        let owner = Owner { tenant: claim["metadata"]["namespace"].as_str().unwrap().into(), name: name.into() };
        let r = render_vm(&owner, &spec, &Template::compile(wire).unwrap(), &input).unwrap();
        let vm = serde_json::to_value(&r.vm).unwrap();
        let errors: Vec<String> = schema.iter_errors(&vm).map(|e| format!("{e} at {}", e.instance_path)).collect();
        assert!(errors.is_empty(), "{name} does not match KubeVirt's schema: {errors:?}");
        let (mut got, mut wanted) = (covered(&vm), covered(want));
        // vmaas gives every Windows guest its Hyper-V enlightenments; the
        // seed writes them for one of its two: compared where it does.
        if wanted["hyperv_spinlocks"].is_null() {
            got["hyperv_spinlocks"] = Value::Null;
            wanted["hyperv_spinlocks"] = Value::Null;
        }
        assert_eq!(got, wanted, "{name}: what the model covers\nrendered: {vm:#}");
        // The seed's masqueraded ports are exposed on the floating IP.
        let ports: Vec<&Value> = want["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| &p["port"])
            .collect();
        let service = serde_json::to_value(&r.service).unwrap();
        for p in ports {
            assert!(service["spec"]["ports"].as_array().unwrap().iter().any(|s| &s["port"] == p), "{name}: port {p} exposed: {service:#}");
        }
    }
}
