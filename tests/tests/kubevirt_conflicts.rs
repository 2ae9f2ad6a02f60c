//! Server-side apply without force, against a real kube-apiserver with
//! KubeVirt played (`vmaas_tests::kubevirt`): a field another manager took
//! on a VM's KubeVirt VM is left to it when vmaas applies again, vmaas's
//! other fields are applied, and the VM's status says which field and
//! which manager (DEGRADED, `FieldConflict`).

use reqwest::Method;
use serde_json::json;
use vmaas_tests::kubevirt::{env, the_vm};
use vmaas_tests::vms::{self, V1};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_another_manager_holds_is_reported_not_overwritten() {
    let (k, _kubevirt, s) = env().await;
    let acme = s.token("acme", false);
    let id = vms::create(&s, &acme, "web", "tiny").await;
    vms::wait_ready(&s, &acme, &id).await;
    let vm = the_vm(&k.api(), &id).await;
    assert_eq!(vm["spec"]["runStrategy"], "Always");

    // An operator's tool takes spec.runStrategy (a forced apply of its own).
    let ns = vm["metadata"]["namespace"].as_str().unwrap();
    let theirs = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "web", "namespace": ns}, "spec": {"runStrategy": "Manual"}});
    let (st, body) = k.api().apply(&theirs, "virtualmachines", "ops-tool").await;
    assert_eq!(st, 200, "{body}");

    // vmaas applies again (new user data): the rest goes in, runStrategy stays the tool's.
    let patch = json!({"object": {"spec": {"user_data": "#cloud-config\nhostname: conflicted\n"}}});
    let (st, body) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&acme), Some(patch)).await;
    assert_eq!(st, 200, "{body}");
    let degraded = vms::wait_until(&s, &acme, &id, "the conflict reported", 60, |v| {
        v["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED" && c["status"] == "CONDITION_STATUS_TRUE")
        })
    })
    .await;
    let condition = degraded["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED")
        .unwrap()
        .clone();
    assert_eq!(condition["reason"], "FieldConflict", "{condition}");
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains(".spec.runStrategy") && message.contains("ops-tool"), "{message}");
    let now = the_vm(&k.api(), &id).await;
    assert_eq!(now["spec"]["runStrategy"], "Manual", "not overwritten");
    assert!(now.to_string().contains("hostname: conflicted"), "vmaas's other fields were applied: {now:#}");
}
