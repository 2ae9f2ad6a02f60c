use serde_json::json;

use super::*;
use crate::reference::{Names, Referred};

fn vm(state: &str, vm_state: &str) -> Value {
    json!({
        "@type": "type.googleapis.com/fulfillment.v1.VirtualMachine",
        "id": "6d1c", "metadata": {"name": "web", "tenant": "acme", "creators": ["alice"], "version": 3},
        "spec": {"template": "small", "template_parameters": {"cpus": {"value": 2}}, "state": state},
        "status": {"state": vm_state, "internalIP": "10.0.0.5", "externalIP": "127.0.0.9", "conditions": [
            {"type": "VIRTUAL_MACHINE_CONDITION_TYPE_PROGRESSING", "status": "CONDITION_STATUS_FALSE"},
            {"type": "VIRTUAL_MACHINE_CONDITION_TYPE_READY", "status": "CONDITION_STATUS_TRUE"}]}
    })
}

#[test]
fn a_vm_reads_as_a_compute_instance() {
    let ci = to_compute_instance(vm("running", "VIRTUAL_MACHINE_STATE_READY"), &Names::default());
    assert_eq!(ci["@type"], COMPUTE_INSTANCE_TYPE_URL);
    assert_eq!(ci["metadata"]["creator"], "alice");
    assert!(ci["metadata"].get("creators").is_none());
    assert_eq!(ci["spec"]["run_strategy"], "Always");
    assert_eq!(ci["spec"]["template"], json!({"id": "small", "name": "small"}));
    assert!(ci["spec"].get("state").is_none());
    assert_eq!(ci["spec"]["template_parameters"]["cpus"]["value"], 2);
    assert_eq!(ci["status"]["state"], "COMPUTE_INSTANCE_STATE_RUNNING");
    assert_eq!(ci["status"]["internal_ip_address"], "10.0.0.5");
    assert_eq!(ci["status"]["external_ip_address"], "127.0.0.9");
    assert_eq!(ci["status"]["conditions"], json!([{"type": "COMPUTE_INSTANCE_CONDITION_TYPE_READY", "status": "CONDITION_STATUS_TRUE"}]));
}

#[test]
fn states_map_to_compute_instance_states() {
    let cases = [
        ("stopped", "VIRTUAL_MACHINE_STATE_PROGRESSING", "COMPUTE_INSTANCE_STATE_STOPPING", "Halted"),
        ("running", "VIRTUAL_MACHINE_STATE_PROGRESSING", "COMPUTE_INSTANCE_STATE_STARTING", "Always"),
        ("stopped", "VIRTUAL_MACHINE_STATE_STOPPED", "COMPUTE_INSTANCE_STATE_STOPPED", "Halted"),
        ("running", "VIRTUAL_MACHINE_STATE_FAILED", "COMPUTE_INSTANCE_STATE_FAILED", "Always"),
        ("running", "VIRTUAL_MACHINE_STATE_DELETING", "COMPUTE_INSTANCE_STATE_DELETING", "Always"),
    ];
    for (spec, vm_state, want, strategy) in cases {
        let ci = to_compute_instance(vm(spec, vm_state), &Names::default());
        assert_eq!(ci["status"]["state"], want, "{spec} {vm_state}");
        assert_eq!(ci["spec"]["run_strategy"], strategy);
    }
}

#[test]
fn a_compute_instance_body_reads_as_a_vm_body() {
    let body = json!({"metadata": {"name": "web", "tenant": "x", "creator": "y"},
        "spec": {"template": "small", "run_strategy": "Halted", "restart_requested_at": "2026-11-23T10:00:00Z", "catalog_item": ""},
        "status": {"state": "COMPUTE_INSTANCE_STATE_RUNNING"}});
    let got = from_compute_instance(body, "object").unwrap();
    assert_eq!(got.vm, json!({"metadata": {"name": "web"}, "spec": {"template": "small", "state": "stopped"}}));
    let typed = json!({"spec": {"template": {"name": "small", "project": "", "shared": false}, "run_strategy": "Always"}});
    assert_eq!(from_compute_instance(typed, "object").unwrap().vm, json!({"spec": {"template": "small", "state": "started"}}));
    assert_eq!(got.restart_requested_at.as_deref(), Some("2026-11-23T10:00:00Z"));
}

#[test]
fn unsupported_fields_are_named() {
    let body = json!({"spec": {"template": "t", "is_windows": true, "run_strategy": "Manual"}});
    let errs = from_compute_instance(body, "object").unwrap_err();
    let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["object.spec.is_windows", "object.spec.run_strategy"]);
    assert!(errs.0[1].reason.contains("Always or Halted"), "{}", errs.0[1].reason);
    let auto = json!({"spec": {"template": "t", "auto_external_ip_attachment": true}});
    assert_eq!(from_compute_instance(auto, "object").unwrap().vm["spec"]["auto_external_ip_attachment"], true, "passed as the VM has it");
}

#[test]
fn disks_pass_as_the_vm_holds_them() {
    let disks = json!({"boot_disk": {"size_gib": 20, "storage_tier": "fast"}, "additional_disks": [{"size_gib": 5}]});
    let mut body = json!({"spec": {"template": "t"}});
    body["spec"].as_object_mut().unwrap().extend(disks.as_object().unwrap().clone());
    let vm = from_compute_instance(body, "object").unwrap().vm;
    assert_eq!(vm["spec"]["boot_disk"], disks["boot_disk"]);
    assert_eq!(vm["spec"]["additional_disks"], disks["additional_disks"]);
    let ci = to_compute_instance(vm, &Names::default());
    assert_eq!(ci["spec"]["additional_disks"], disks["additional_disks"]);
}

#[test]
fn references_are_typed_in_answers_and_read_in_both_forms() {
    let body = json!({"spec": {"template": {"name": "small"}, "instance_type": {"name": "general.small"},
        "disk_image": {"name": "debian"}, "catalog_item": {"name": "web-offer"},
        "network_attachments": [{"subnet": {"name": "web"}, "security_groups": [{"id": "sg-1"}, "ssh"]}]}});
    let vm = from_compute_instance(body, "object").unwrap().vm;
    assert_eq!(
        vm["spec"],
        json!({"template": "small", "instance_type": "general.small", "catalog_item": "web-offer", "image": {"source_ref": "debian"},
        "network_attachments": [{"subnet": "web", "security_groups": ["sg-1", "ssh"]}]})
    );

    let mut held = vm.clone();
    held["spec"]["network_attachments"][0] = json!({"subnet": "s-1", "security_groups": ["sg-1"], "ip_address": "10.0.0.5"});
    let names = Names::from([
        ((Referred::Subnet, "s-1".to_owned()), ("s-1".to_owned(), "web".to_owned())),
        ((Referred::Image, "debian".to_owned()), ("i-9".to_owned(), "debian".to_owned())),
    ]);
    let ci = to_compute_instance(held, &names);
    assert_eq!(ci["spec"]["disk_image"], json!({"id": "i-9", "name": "debian"}));
    assert!(ci["spec"].get("image").is_none());
    assert_eq!(
        ci["spec"]["network_attachments"],
        json!([{"subnet": {"id": "s-1", "name": "web"},
        "security_groups": [{"id": "sg-1"}], "ip_address": "10.0.0.5"}])
    );
}

#[test]
fn bad_references_are_named() {
    let body = json!({"spec": {"template": 3, "disk_image": {"name": "a"}, "image": {"source_ref": "b"}, "catalog_item": {"nmae": "c"},
        "network_attachments": [{"subnet": {"nmae": "web"}, "security_groups": [[]]}]}});
    let errs = from_compute_instance(body, "object").unwrap_err();
    let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "object.spec.template",
            "object.spec.catalog_item",
            "object.spec.disk_image",
            "object.spec.network_attachments[0].subnet",
            "object.spec.network_attachments[0].security_groups[0]"
        ]
    );
}
