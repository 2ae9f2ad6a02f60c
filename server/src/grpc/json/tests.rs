use prost_reflect::{DescriptorPool, SerializeOptions};
use serde_json::json;

use super::*;

fn pool() -> DescriptorPool {
    DescriptorPool::decode(crate::grpc::DESCRIPTORS).unwrap()
}

/// `msg` as JSON again, with the proto field names.
fn json_of(msg: &DynamicMessage) -> Value {
    let opts = SerializeOptions::new().use_proto_field_name(true).stringify_64_bit_integers(false);
    msg.serialize_with_options(serde_json::value::Serializer, &opts).unwrap()
}

#[test]
fn plain_values_are_typed_and_unknown_fields_skipped() {
    let desc = pool().get_message_by_name("fulfillment.v1.VirtualMachine").unwrap();
    let event = json!({"@type": "type.googleapis.com/fulfillment.v1.VirtualMachine", "id": "vm-1",
        "spec": {"template": "small", "template_parameters": {"cpus": {"value": 2}, "name": {"value": "x"}}},
        "status": {"state": "VIRTUAL_MACHINE_STATE_READY", "internalIP": "10.0.0.5", "unknown": 1}});
    let back = json_of(&from_rest(desc, event).unwrap());
    assert_eq!(back["status"]["ip_address"], "10.0.0.5");
    assert_eq!(back["status"]["state"], "VIRTUAL_MACHINE_STATE_READY");
    let params = &back["spec"]["template_parameters"];
    assert_eq!(params["cpus"], json!({"@type": "type.googleapis.com/google.protobuf.Int64Value", "value": 2}));
    assert_eq!(params["name"], json!({"@type": "type.googleapis.com/google.protobuf.StringValue", "value": "x"}));
}

#[test]
fn references_held_as_strings_are_typed() {
    let pool = pool();
    let net = "6d1c0b9e-2f4a-4c55-9d0e-0c1f2a3b4c5d";
    let subnet = json!({"id": "s-1", "spec": {"virtual_network": net, "ipv4_cidr": "10.0.1.0/24"}});
    let back = json_of(&from_rest(pool.get_message_by_name("osac.public.v1.Subnet").unwrap(), subnet).unwrap());
    assert_eq!(back["spec"]["virtual_network"], json!({"id": net}));
    let ip = json!({"id": "e-1", "spec": {"pool": "default"}, "status": {"pool": "default"}});
    let back = json_of(&from_rest(pool.get_message_by_name("osac.public.v1.ExternalIP").unwrap(), ip).unwrap());
    assert_eq!(back["spec"]["pool"], json!({"name": "default"}), "a pool is held by its name");
    assert_eq!(back["status"]["pool"], "default", "a plain string field stays one");
}
