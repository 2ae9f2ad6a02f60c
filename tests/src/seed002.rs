//! Seed 002 ("Virtualization on an ACP"): its three KubeVirt
//! VirtualMachines, read from `../shared/seeds/`, and what of a
//! VirtualMachine the model covers, to compare vmaas's rendering with them
//! (`tests/tests/seed002.rs`).

use serde_json::Value;

use crate::tf::{repo, shared};

/// The YAML documents of `text` (separated by `---`), comments only skipped.
pub fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter(|d| d.lines().any(|l| !l.trim().is_empty() && !l.trim().starts_with('#')))
        .map(|d| serde_norway::from_str(d).unwrap())
        .collect()
}

/// The seed's VirtualMachines, from the YAML blocks of seed 002.
pub fn seed_vms() -> Vec<Value> {
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

/// The text of `examples/FILE`.
pub fn example(file: &str) -> String {
    std::fs::read_to_string(repo().join("examples").join(file)).unwrap()
}

/// vCPUs: cores × sockets × threads.
pub fn vcpus(cpu: &Value) -> u64 {
    ["cores", "sockets", "threads"].iter().map(|k| cpu[k].as_u64().unwrap_or(1)).product()
}

/// What the model covers of a VirtualMachine, in one comparable value:
/// every field seed 002 writes but the names of its objects, its finalizer,
/// its `app` label (a tenant's, which travels as `tenant.vmaas.io/app`),
/// and its pod network's binding.
pub fn covered(vm: &Value) -> Value {
    let t = &vm["spec"]["template"]["spec"];
    let d = &t["domain"];
    let dvs = vm["spec"]["dataVolumeTemplates"].as_array().cloned().unwrap_or_default();
    let size = |dv: &Value| dv["spec"]["storage"]["resources"]["requests"]["storage"].as_str().unwrap_or_default().to_owned();
    let blank: Vec<String> = dvs.iter().filter(|dv| dv["spec"]["source"].get("blank").is_some()).map(size).collect();
    let efi = d["firmware"]["bootloader"].get("efi");
    let bridged = d["devices"]["interfaces"].as_array().into_iter().flatten().filter(|i| i.get("bridge").is_some()).count();
    let running = vm["spec"]["running"] == true || vm["spec"]["runStrategy"] == "Always";
    let dev = &d["devices"];
    let by_name = |list: &Value, key: &dyn Fn(&Value) -> Value| -> Value {
        list.as_array().into_iter().flatten().map(|x| (x["name"].as_str().unwrap_or_default().to_owned(), key(x))).collect()
    };
    // KubeVirt's defaults, written out: one socket and thread, virtio.
    let or = |v: &Value, default: Value| if v.is_null() { default } else { v.clone() };
    let disks: Vec<String> = t["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v.get("dataVolume").is_some())
        .map(|v| v["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    let buses: Value = by_name(&dev["disks"], &|x| or(&x["disk"]["bus"], "virtio".into()))
        .as_object()
        .map(|o| o.iter().filter(|(k, _)| disks.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let dv_class: Vec<Value> = dvs.iter().map(|dv| dv["spec"]["storage"]["storageClassName"].clone()).collect();
    let dv_prealloc: Vec<Value> = dvs.iter().map(|dv| dv["spec"]["preallocation"].clone()).collect();
    let kubevirt_keys = |m: &Value, prefixes: &[&str]| -> Value {
        m.as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let instance = &vm["spec"]["template"]["metadata"];
    serde_json::json!({
        "labels": kubevirt_keys(&vm["metadata"]["labels"], &["vm.kubevirt.io/", "kubevirt.io/"]),
        "instance_labels": kubevirt_keys(&instance["labels"], &["kubevirt.io/"]),
        "instance_annotations": kubevirt_keys(&instance["annotations"], &["vm.kubevirt.io/"]),
        "cpu": [or(&d["cpu"]["cores"], 1.into()), or(&d["cpu"]["sockets"], 1.into()), or(&d["cpu"]["threads"], 1.into())],
        "disk_buses": buses,
        "nic_models": by_name(&dev["interfaces"], &|x| or(&x["model"], "virtio".into())),
        "multiqueue": or(&dev["networkInterfaceMultiqueue"], false.into()),
        "rng": dev.get("rng").is_some(),
        "inputs": or(&dev["inputs"], serde_json::json!([])),
        "log_serial_console": dev["logSerialConsole"],
        "machine_type": d["machine"]["type"],
        "architecture": t["architecture"],
        "grace": t["terminationGracePeriodSeconds"],
        "storage_classes": dv_class,
        "preallocation": dv_prealloc,
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

/// `vm` with what its preference `pref` prefers filled in where the VM says
/// nothing, as KubeVirt does when it makes the VMI: the firmware, SMM,
/// Hyper-V, the TPM and the clock.
pub fn with_preference(mut vm: Value, pref: &Value) -> Value {
    let p = &pref["spec"];
    let d = &mut vm["spec"]["template"]["spec"]["domain"];
    let mut fill = |at: &[&str], v: &Value| {
        if v.is_null() {
            return;
        }
        let mut cur = &mut *d;
        for k in at {
            cur = &mut cur[*k];
        }
        if cur.is_null() {
            *cur = v.clone();
        }
    };
    fill(&["firmware", "bootloader", "efi"], &p["firmware"]["preferredEfi"]);
    fill(&["features", "smm"], &p["features"]["preferredSmm"]);
    fill(&["features", "hyperv"], &p["features"]["preferredHyperv"]);
    fill(&["devices", "tpm"], &p["devices"]["preferredTPM"]);
    fill(&["clock", "timezone"], &p["clock"]["preferredClockOffset"]["timezone"]);
    fill(&["clock", "timer"], &p["clock"]["preferredTimer"]);
    vm
}
