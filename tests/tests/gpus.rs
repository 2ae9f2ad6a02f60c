//! GPUs on the qemu backend: the host's display controllers bound to
//! vfio-pci (here a sysfs tree the test makes: this host has no GPU), each
//! given to one VM, matched by the template's device name through the
//! administrator's `--gpu-alias`. A VM asking for a model the host lacks is
//! FAILED with `NoGPUAvailable`, naming what is free; one asking for the
//! model it has gets that GPU's address on its QEMU command line (QEMU then
//! refuses it: the device is not real here, and it says so). A GPU
//! instance type finds its GPU by its PCI ids the same way.

use serde_json::Value;
use vmaas_tests::Server;
use vmaas_tests::vms::{create, publish, state, wait_until};

const TEMPLATES: &str = "id: a10\nspec_defaults: {image: test-guest, gpus: [{name: gpu0, device_name: nvidia.com/A10}]}\n\
    ---\nid: h100\nspec_defaults: {image: test-guest, gpus: [{name: gpu0, device_name: nvidia.com/H100}]}\n\
    ---\nid: plain\nspec_defaults: {image: test-guest}\n";

fn failed(v: &Value) -> &Value {
    v["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_FAILED").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpus_are_matched_by_model_and_refused_when_none_fits() {
    let sysfs = tempfile::tempdir().unwrap();
    let dev = sysfs.path().join("bus/pci/devices/0000:65:00.0");
    std::fs::create_dir_all(&dev).unwrap();
    for (f, v) in [("class", "0x030200"), ("vendor", "0x10de"), ("device", "0x2236")] {
        std::fs::write(dev.join(f), format!("{v}\n")).unwrap();
    }
    let driver = sysfs.path().join("bus/pci/drivers/vfio-pci");
    std::fs::create_dir_all(&driver).unwrap();
    std::os::unix::fs::symlink(&driver, dev.join("driver")).unwrap();
    let root = sysfs.path().to_str().unwrap();
    let s = Server::start_qemu_with(&["--sysfs-root", root, "--gpu-alias", "nvidia.com/A10=10de:2236"]).await;
    publish(&s, TEMPLATES);
    let t = s.token("acme", false);
    let (_, health) = s.raw(reqwest::Method::GET, "/healthz", None, None).await;
    assert_eq!(health["backend"]["capabilities"]["gpus"], true, "{health:#}");

    let h100 = create(&s, &t, "big", "h100").await;
    let vm = wait_until(&s, &t, &h100, "FAILED", 30, |v| state(v) == "VIRTUAL_MACHINE_STATE_FAILED").await;
    assert_eq!(failed(&vm)["reason"], "NoGPUAvailable", "{vm:#}");
    let message = failed(&vm)["message"].as_str().unwrap();
    assert!(message.contains("nvidia.com/H100") && message.contains("[0000:65:00.0 (10de:2236)]"), "{message}");

    let a10 = create(&s, &t, "small", "a10").await;
    let vm = wait_until(&s, &t, &a10, "FAILED", 60, |v| state(v) == "VIRTUAL_MACHINE_STATE_FAILED").await;
    let message = failed(&vm)["message"].as_str().unwrap();
    assert_eq!(failed(&vm)["reason"], "QemuFailed", "{vm:#}");
    assert!(message.contains("0000:65:00.0"), "QEMU was given the A10: {message}");

    // A GPU instance type: its PCI ids find the same GPU for a template without one.
    let admin = s.token("ops", true);
    let gpu = serde_json::json!({"pci_device_selector": "10DE:2236", "resource_name": "nvidia.com/GA102GL_A10", "count": 1});
    let ty = serde_json::json!({"object": {"metadata": {"name": "g1.small"}, "spec": {"cores": 1, "memory_gib": 1, "gpu": gpu}}});
    let (st, b) = s.raw(reqwest::Method::POST, "/api/fulfillment/v1/instance_types", Some(&admin), Some(ty)).await;
    assert_eq!(st, 201, "{b}");
    let body = serde_json::json!({"object": {"metadata": {"name": "typed"}, "spec": {"template": "plain", "instance_type": "g1.small"}}});
    let (st, b) = s.raw(reqwest::Method::POST, "/api/fulfillment/v1/virtual_machines", Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{b}");
    let typed = b["object"]["id"].as_str().unwrap().to_owned();
    let vm = wait_until(&s, &t, &typed, "FAILED", 60, |v| state(v) == "VIRTUAL_MACHINE_STATE_FAILED").await;
    let message = failed(&vm)["message"].as_str().unwrap();
    assert_eq!(failed(&vm)["reason"], "QemuFailed", "{vm:#}");
    assert!(message.contains("0000:65:00.0"), "QEMU was given the instance type's GPU: {message}");
}
