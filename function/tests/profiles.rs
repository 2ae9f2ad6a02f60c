//! Guest profiles rendered by the function, checked against KubeVirt's
//! schema in `../shared/schemas`: EFI with Secure Boot and a persistent
//! NVRAM, SMM, a persistent TPM, and for Windows the Hyper-V
//! enlightenments and a clock in local time.

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

/// The rendered VM's `spec.template.spec.domain`, after checking the whole VM against KubeVirt's schema.
fn domain(profile: Value) -> Value {
    let input = input();
    let spec: VmXrSpec = serde_json::from_value(json!({"template": "simple_vm"})).unwrap();
    let owner = Owner { tenant: "team-a".into(), name: "vault".into() };
    let r = render_vm(&owner, &spec, &with_profile(&input, profile), &input).unwrap();
    let vm = serde_json::to_value(&r.vm).unwrap();
    let schema: Value =
        serde_json::from_slice(&std::fs::read(shared().join("schemas/kubevirt.io_virtualmachine_v1.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&vm).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(errors.is_empty(), "the VM does not match KubeVirt's schema:\n{}\n{vm:#}", errors.join("\n"));
    vm["spec"]["template"]["spec"]["domain"].clone()
}

#[test]
fn efi_secure_boot_and_a_tpm_render_as_kubevirt_names_them() {
    let d = domain(json!({"firmware": "efi", "secure_boot": true, "tpm": true}));
    assert_eq!(d["firmware"], json!({"bootloader": {"efi": {"secureBoot": true, "persistent": true}}}));
    assert_eq!(d["features"], json!({"smm": {"enabled": true}}));
    assert_eq!(d["devices"]["tpm"], json!({"persistent": true}));
    assert_eq!(d.get("clock"), None);
}

#[test]
fn a_bios_linux_guest_renders_as_before() {
    let d = domain(json!({}));
    for absent in ["firmware", "features", "clock"] {
        assert_eq!(d.get(absent), None, "{absent}");
    }
    assert_eq!(d["devices"].get("tpm"), None);
    let efi = domain(json!({"firmware": "efi"}));
    assert_eq!(efi["firmware"]["bootloader"]["efi"]["secureBoot"], false, "KubeVirt defaults Secure Boot on: off is written");
    assert_eq!(efi.get("features"), None, "no SMM without Secure Boot");
}

#[test]
fn windows_gets_hyperv_a_local_clock_secure_boot_and_a_tpm() {
    let d = domain(json!({"guest_os_family": "windows"}));
    let hv = &d["features"]["hyperv"];
    for f in ["relaxed", "vapic", "vpindex", "synic"] {
        assert_eq!(hv[f], json!({}), "{f}");
    }
    assert_eq!(hv["spinlocks"]["spinlocks"], 8191);
    assert_eq!(d["features"]["smm"]["enabled"], true);
    assert_eq!(d["firmware"]["bootloader"]["efi"]["secureBoot"], true);
    assert_eq!(d["devices"]["tpm"]["persistent"], true);
    assert_eq!(d["clock"]["timezone"], "UTC");
    assert_eq!(d["clock"]["timer"]["hyperv"], json!({}));
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
