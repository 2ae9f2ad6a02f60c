//! Guest profiles rendered by the function as each VM's own
//! `VirtualMachinePreference`, checked against KubeVirt's schemas in
//! `../shared/schemas`: EFI with Secure Boot and a persistent NVRAM, SMM, a
//! persistent TPM, and for Windows the Hyper-V enlightenments and a clock
//! in local time; and the live-resize limits in the domain.

use std::path::PathBuf;

use serde_json::{Value, json};
use vmaas_function::render::render_vm;
use vmaas_function::xr::{FunctionInput, Owner, VmXrSpec};
use vmaas_model::Template;

fn shared() -> PathBuf {
    std::env::var_os("VMAAS_SHARED").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

fn input() -> FunctionInput {
    let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/compositions/input.yaml")).unwrap();
    serde_json::from_value(serde_norway::from_str::<Value>(&text).unwrap()).unwrap()
}

/// `simple_vm` with `profile` laid over its `spec_defaults`.
fn with_profile(input: &FunctionInput, profile: Value) -> Template {
    let mut wire = serde_json::to_value(input.templates.iter().find(|t| t.id == "simple_vm").unwrap()).unwrap();
    for (k, v) in profile.as_object().unwrap() {
        wire["spec_defaults"][k] = v.clone();
    }
    Template::compile(serde_json::from_value(wire).unwrap()).unwrap()
}

/// `obj` checked against KubeVirt's schema `file` in `../shared/schemas`.
fn schema_checked(obj: &Value, file: &str) {
    let schema: Value = serde_json::from_slice(&std::fs::read(shared().join("schemas").join(file)).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(obj).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(errors.is_empty(), "{file}:\n{}\n{obj:#}", errors.join("\n"));
}

/// The rendered VM's `spec.template.spec.domain` and its own preference's
/// `spec` (null without one), each checked against KubeVirt's schema; the
/// VM references the preference.
fn rendered(profile: Value) -> (Value, Value) {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(json!({"template": "simple_vm"})).unwrap();
    let owner = Owner { tenant: "team-a".into(), name: "vault".into() };
    let r = render_vm(&owner, &spec, &with_profile(&input, profile), &input, None).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    schema_checked(&vm, "kubevirt.io_virtualmachine_v1.json");
    let pref = r.shapes.iter().find(|o| o["kind"] == "VirtualMachinePreference").cloned().unwrap_or(Value::Null);
    if !pref.is_null() {
        schema_checked(&pref, "instancetype.kubevirt.io_virtualmachinepreference_v1beta1.json");
        assert_eq!(pref["metadata"]["namespace"], vm["metadata"]["namespace"], "in the VM's namespace");
        assert_eq!(vm["spec"]["preference"], json!({"kind": "VirtualMachinePreference", "name": pref["metadata"]["name"]}));
    }
    (vm["spec"]["template"]["spec"]["domain"].clone(), pref["spec"].clone())
}

/// The domain of a VM whose platform is KubeVirt's default (no preference).
fn domain(profile: Value) -> Value {
    let (d, pref) = rendered(profile);
    assert!(pref.is_null(), "no preference: {pref:#}");
    d
}

#[test]
fn efi_secure_boot_and_a_tpm_are_the_vms_own_preference() {
    let (d, p) = rendered(json!({"firmware": "efi", "secure_boot": true, "tpm": true}));
    assert_eq!(p["firmware"], json!({"preferredEfi": {"secureBoot": true, "persistent": true}}));
    assert_eq!(p["features"], json!({"preferredSmm": {"enabled": true}}));
    assert_eq!(p["devices"], json!({"preferredTPM": {"persistent": true}}));
    assert_eq!(p.get("clock"), None);
    for absent in ["firmware", "features", "clock"] {
        assert_eq!(d.get(absent), None, "{absent} is the preference's, not the domain's");
    }
}

#[test]
fn a_bios_linux_guest_renders_as_before() {
    let d = domain(json!({}));
    for absent in ["firmware", "features", "clock"] {
        assert_eq!(d.get(absent), None, "{absent}");
    }
    assert_eq!(d["devices"].get("tpm"), None);
    let (_, efi) = rendered(json!({"firmware": "efi"}));
    assert_eq!(efi["firmware"]["preferredEfi"]["secureBoot"], false, "KubeVirt defaults Secure Boot on: off is written");
    assert_eq!(efi.get("features"), None, "no SMM without Secure Boot");
}

#[test]
fn windows_gets_hyperv_a_local_clock_secure_boot_and_a_tpm() {
    let (_, p) = rendered(json!({"guest_os_family": "windows"}));
    let hv = &p["features"]["preferredHyperv"];
    for f in ["relaxed", "vapic", "vpindex", "synic"] {
        assert_eq!(hv[f], json!({}), "{f}");
    }
    assert_eq!(hv["spinlocks"]["spinlocks"], 8191);
    assert_eq!(p["features"]["preferredSmm"]["enabled"], true);
    assert_eq!(p["firmware"]["preferredEfi"]["secureBoot"], true);
    assert_eq!(p["devices"]["preferredTPM"]["persistent"], true);
    assert_eq!(p["clock"]["preferredClockOffset"]["timezone"], "UTC");
    assert_eq!(p["clock"]["preferredTimer"]["hyperv"], json!({}));
}

#[test]
fn limits_render_as_kubevirt_live_update_sockets_and_max_guest() {
    let d = domain(json!({"max_cpu_cores": 4, "max_memory": "8Gi"}));
    assert_eq!(d["cpu"], json!({"cores": 1, "sockets": 2, "maxSockets": 4}), "simple_vm's 2 vCPUs as sockets");
    assert_eq!(d["memory"], json!({"guest": "2Gi", "maxGuest": "8Gi"}));
    let fixed = domain(json!({}));
    assert_eq!(fixed["cpu"], json!({"cores": 2}));
    assert_eq!(fixed["memory"], json!({"guest": "2Gi"}));
}

/// A claim of `simple_vm` with `spec` laid over it, rendered for `vm`.
fn claim(vm: &str, spec: Value, kept: Option<&str>) -> Result<vmaas_function::render::RenderedVm, String> {
    let input = input();
    let mut s = json!({"template": "simple_vm"});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    let spec: VmXrSpec = serde_json::from_value(s).unwrap();
    let template = Template::compile(input.templates.iter().find(|t| t.id == "simple_vm").unwrap().clone()).unwrap();
    render_vm(&Owner { tenant: "team-a".into(), name: vm.into() }, &spec, &template, &input, kept).map_err(|e| e.to_string())
}

#[test]
fn a_claims_instance_type_is_a_virtual_machine_instancetype_of_its_own() {
    let r = claim("sized", json!({"instanceType": "general.large"}), None).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    schema_checked(&vm, "kubevirt.io_virtualmachine_v1.json");
    let it = r.shapes.iter().find(|o| o["kind"] == "VirtualMachineInstancetype").expect("an instance type").clone();
    schema_checked(&it, "instancetype.kubevirt.io_virtualmachineinstancetype_v1beta1.json");
    assert_eq!(it["spec"], json!({"cpu": {"guest": 4}, "memory": {"guest": "16Gi"}}));
    assert_eq!(it["metadata"]["labels"]["vmaas.io/instance-type"], "general.large");
    assert_eq!(it["metadata"]["namespace"], vm["metadata"]["namespace"]);
    assert_eq!(vm["spec"]["instancetype"], json!({"kind": "VirtualMachineInstancetype", "name": it["metadata"]["name"]}));
    let d = &vm["spec"]["template"]["spec"]["domain"];
    assert!(d.get("cpu").is_none() && d.get("memory").is_none(), "the shape is the instance type's: {d:#}");
    assert_eq!(r.instance_type.as_deref(), Some("general.large"));
    assert_eq!(vmaas_function::shape::deprecation_note("general.large", &input()), None);

    // Seed 001 writes it among the template parameters; it is deprecated, and says so.
    let seed = claim("seed", json!({"templateParameters": {"instanceType": "o1.small"}}), None).unwrap();
    let it = seed.shapes.iter().find(|o| o["kind"] == "VirtualMachineInstancetype").unwrap();
    assert_eq!(it["spec"], json!({"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}}));
    let note = vmaas_function::shape::deprecation_note("o1.small", &input()).unwrap();
    assert_eq!(note, "instance type \"o1.small\" is DEPRECATED: move to \"general.small\"");
    // No instance type: the shape stays in the domain, and nothing else is composed.
    let plain = claim("plain", json!({}), None).unwrap();
    assert!(plain.shapes.is_empty() && plain.instance_type.is_none());
    assert_eq!(serde_json::to_value(&plain.vm).unwrap()["spec"]["template"]["spec"]["domain"]["cpu"], json!({"cores": 2}));
}

#[test]
fn an_obsolete_unknown_or_conflicting_instance_type_is_refused_naming_the_field() {
    let e = claim("old", json!({"instanceType": "m1.tiny"}), None).err().unwrap();
    assert!(e.contains("spec.instanceType") && e.contains("OBSOLETE") && e.contains("general.small"), "{e}");
    assert!(claim("old", json!({"instanceType": "m1.tiny"}), Some("m1.tiny")).is_ok(), "a VM keeps the type it has");
    let e = claim("nope", json!({"instanceType": "x9.huge"}), None).err().unwrap();
    assert!(e.contains("spec.instanceType") && e.contains("no instance type \"x9.huge\""), "{e}");
    let e = claim("both", json!({"instanceType": "general.large", "templateParameters": {"vm_cpu_cores": 2}}), None).err().unwrap();
    assert!(e.contains("spec.templateParameters.vm_cpu_cores") && e.contains("general.large"), "{e}");
    let e = claim("two", json!({"instanceType": "general.large", "templateParameters": {"instanceType": "o1.small"}}), None).err().unwrap();
    assert!(e.contains("spec.instanceType") && e.contains("give one"), "{e}");
}

#[test]
fn a_claims_boot_disk_and_additional_disks_are_data_volumes_of_their_sizes() {
    let disks = json!({"bootDisk": {"sizeGib": 30, "storageTier": "fast"}, "additionalDisks": [{"sizeGib": 4}]});
    let vm = serde_json::to_value(&claim("disks", disks, None).unwrap().vm).unwrap();
    schema_checked(&vm, "kubevirt.io_virtualmachine_v1.json");
    let storage =
        |dv: &Value| (dv["spec"]["storage"]["resources"]["requests"]["storage"].clone(), dv["spec"]["storage"]["storageClassName"].clone());
    let dvs: Vec<_> = vm["spec"]["dataVolumeTemplates"].as_array().unwrap().iter().map(storage).collect();
    assert_eq!(dvs, [(json!("30Gi"), json!("fast")), (json!("4Gi"), Value::Null)], "{vm:#}");
    let e = claim("small", json!({"bootDisk": {"sizeGib": 1}, "additionalDisks": [{"sizeGib": 0}]}), None).err().unwrap();
    assert!(e.contains("spec.bootDisk.sizeGib") && e.contains("at least the template's boot disk"), "{e}");
    assert!(e.contains("spec.additionalDisks[0].sizeGib"), "{e}");
}
