use prost_reflect::DescriptorPool;
use serde_json::json;

use super::*;

fn pool() -> DescriptorPool {
    DescriptorPool::decode(crate::grpc::DESCRIPTORS).unwrap()
}

fn message(pool: &DescriptorPool, name: &str, value: Value) -> DynamicMessage {
    DynamicMessage::deserialize(pool.get_message_by_name(name).unwrap(), value).unwrap()
}

#[test]
fn a_mask_sends_only_the_fields_it_names() {
    let pool = pool();
    let req = message(
        &pool,
        "osac.public.v1.ComputeInstancesUpdateRequest",
        json!({"object": {"id": "vm-1", "metadata": {"name": "web", "version": 4},
            "spec": {"template": {"name": "small"}, "run_strategy": "Halted", "user_data": ""}},
            "update_mask": "spec.runStrategy,spec.userData"}),
    );
    let body: Value = serde_json::from_slice(&request_body(&req, "object").unwrap()).unwrap();
    assert_eq!(body, json!({"id": "vm-1", "metadata": {"version": 4}, "spec": {"run_strategy": "Halted", "user_data": ""}}));
}

#[test]
fn without_a_mask_the_fields_set_are_sent() {
    let pool = pool();
    let req = message(
        &pool,
        "fulfillment.v1.VirtualMachinesCreateRequest",
        json!({"object": {"metadata": {"name": "web"}, "spec": {"template": "small",
            "template_parameters": {"cpus": {"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": 2}}}}}),
    );
    let body: Value = serde_json::from_slice(&request_body(&req, "object").unwrap()).unwrap();
    let want = json!({"metadata": {"name": "web"}, "spec": {"template": "small",
        "template_parameters": {"cpus": {"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": 2}}}});
    assert_eq!(body, want);
}

#[test]
fn a_mask_naming_no_field_is_refused() {
    let pool = pool();
    let req = message(&pool, "fulfillment.v1.VirtualMachinesUpdateRequest", json!({"object": {"id": "x"}, "update_mask": "spec.colour"}));
    let err = request_body(&req, "object").unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("spec.colour") && err.message().contains("no field colour"), "{}", err.message());
}

#[test]
fn answers_are_unwrapped_and_plain_values_typed() {
    let pool = pool();
    let desc = pool.get_message_by_name("fulfillment.v1.VirtualMachinesGetResponse").unwrap();
    let answer = json!({"object": {"@type": "type.googleapis.com/fulfillment.v1.VirtualMachine", "id": "vm-1",
        "spec": {"template": "small", "template_parameters": {"cpus": {"value": 2}, "name": {"value": "x"}}},
        "status": {"state": "VIRTUAL_MACHINE_STATE_READY", "internalIP": "10.0.0.5", "unknown": 1}}});
    let msg = response(desc, Some("object"), answer.to_string().as_bytes()).unwrap();
    let back = to_rest(&msg, false).unwrap();
    assert_eq!(back["object"]["status"]["ip_address"], "10.0.0.5");
    assert_eq!(back["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_READY");
    let params = &back["object"]["spec"]["template_parameters"];
    assert_eq!(params["cpus"], json!({"@type": "type.googleapis.com/google.protobuf.Int64Value", "value": 2}));
    assert_eq!(params["name"], json!({"@type": "type.googleapis.com/google.protobuf.StringValue", "value": "x"}));
}

#[test]
fn an_empty_answer_is_an_empty_response() {
    let pool = pool();
    let desc = pool.get_message_by_name("fulfillment.v1.VirtualMachinesDeleteResponse").unwrap();
    assert_eq!(response(desc, None, b"").unwrap().fields().count(), 0);
}

#[test]
fn references_held_as_strings_are_answered_typed() {
    let pool = pool();
    let desc = pool.get_message_by_name("osac.public.v1.SubnetsGetResponse").unwrap();
    let net = "6d1c0b9e-2f4a-4c55-9d0e-0c1f2a3b4c5d";
    let answer = json!({"object": {"id": "s-1", "spec": {"virtual_network": net, "ipv4_cidr": "10.0.1.0/24"}}});
    let back = to_rest(&response(desc, Some("object"), answer.to_string().as_bytes()).unwrap(), false).unwrap();
    assert_eq!(back["object"]["spec"]["virtual_network"], json!({"id": net}));
    let desc = pool.get_message_by_name("osac.public.v1.ExternalIPsGetResponse").unwrap();
    let answer = json!({"object": {"id": "e-1", "spec": {"pool": "default"}, "status": {"pool": "default"}}});
    let back = to_rest(&response(desc, Some("object"), answer.to_string().as_bytes()).unwrap(), false).unwrap();
    assert_eq!(back["object"]["spec"]["pool"], json!({"name": "default"}), "a pool is held by its name");
    assert_eq!(back["object"]["status"]["pool"], "default", "a plain string field stays one");
}
