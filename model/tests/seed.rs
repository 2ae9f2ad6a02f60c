//! The JSON examples of the seed design (`shared/seeds/000_*.txt`) work as written.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;
use vmaas_model::*;

fn seed_template() -> VirtualMachineTemplate {
    // Seed 000's example as written, shared with the end-to-end tests.
    let req: Envelope<VirtualMachineTemplate> = serde_json::from_str(include_str!("data/seed000_template.json")).unwrap();
    req.object
}

fn params(v: serde_json::Value) -> BTreeMap<String, ParameterValue> {
    serde_json::from_value(v).unwrap()
}

#[test]
fn seed_template_compiles_and_infers_types() {
    let t = Template::compile(seed_template()).unwrap();
    let kinds: Vec<_> = t.parameters().iter().map(|p| p.kind.parameter_type()).collect();
    assert_eq!(kinds, [ParameterType::Integer, ParameterType::Quantity, ParameterType::Quantity]);
    let r = t.resolve(&BTreeMap::new(), "spec.template_parameters").unwrap();
    assert_eq!(r.spec.cpu.cores, 2);
    assert_eq!(r.spec.memory_bytes(), 2 << 30);
    assert_eq!(r.spec.disk_bytes(), 20 << 30);
}

#[test]
fn seed_vm_request_resolves() {
    let req: Envelope<CreateVirtualMachine> = serde_json::from_value(json!({
      "object": {
        "id": "myvm",
        "spec": {
          "state": "started",
          "template": "ocp_virt_vm",
          "template_parameters": {
            "vm_cpu_cores": { "value": 4 },
            "vm_disk_size": { "value": "30Gi" },
            "vm_memory": { "value": "4Gi" }
          }
        }
      }
    }))
    .unwrap();
    assert_eq!(req.object.requested_name(), Some(("myvm", "object.id")));
    let t = Template::compile(seed_template()).unwrap();
    let r = t.resolve(&req.object.spec.template_parameters, "spec.template_parameters").unwrap();
    assert_eq!(r.spec.cpu.cores, 4);
    assert_eq!(r.spec.memory_bytes(), 4 << 30);
    // Stored as written.
    let back = serde_json::to_value(&req.object.spec.template_parameters).unwrap();
    assert_eq!(back["vm_memory"]["value"], "4Gi");
}

#[test]
fn every_problem_is_reported_with_its_field() {
    let t = Template::compile(seed_template()).unwrap();
    let errs = t
        .resolve(
            &params(json!({
                "vm_cpu_cores": {"value": "four"},
                "vm_memory": {"value": "4GB"},
                "vm_colour": {"value": "red"}
            })),
            "spec.template_parameters",
        )
        .unwrap_err();
    let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.template_parameters.vm_colour", "spec.template_parameters.vm_cpu_cores.value", "spec.template_parameters.vm_memory.value"]
    );
    let text = errs.to_string();
    assert!(text.contains("valid parameters are: vm_cpu_cores, vm_disk_size, vm_memory"), "{text}");
    assert!(text.contains("expected an integer, got the string \"four\""), "{text}");
    assert!(text.contains("unknown suffix \"GB\""), "{text}");
}

#[test]
fn constraints_and_required() {
    let t: VirtualMachineTemplate = serde_json::from_value(json!({
        "id": "sized",
        "parameters": [
            {"name": "vm_cpu_cores", "min": 1, "max": 8, "default": {"value": 1}},
            {"name": "vm_memory", "min": "512Mi", "max": "16Gi", "default": {"value": "1Gi"}},
            {"name": "flavour", "type": "string", "enum": ["small", "large"], "required": true},
            {"name": "hostname", "type": "string", "pattern": "[a-z]+"},
            {"name": "vm_ssh_keys", "max": 2}
        ]
    }))
    .unwrap();
    let t = Template::compile(t).unwrap();
    let errs = t
        .resolve(
            &params(json!({
                "vm_cpu_cores": {"value": 32},
                "vm_memory": {"value": "256Mi"},
                "hostname": {"value": "Bad!"},
                "vm_ssh_keys": {"value": ["a", "b", "c"]}
            })),
            "spec.template_parameters",
        )
        .unwrap_err();
    let got: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "spec.template_parameters.flavour: required parameter is missing (a string)",
            "spec.template_parameters.hostname.value: must match the pattern [a-z]+; got \"Bad!\"",
            "spec.template_parameters.vm_cpu_cores.value: must be at most 8, got 32",
            "spec.template_parameters.vm_memory.value: must be at least 512Mi, got 256Mi",
            "spec.template_parameters.vm_ssh_keys.value: must have at most 2 items, got 3",
        ]
    );
    let ok = t.resolve(&params(json!({"flavour": {"value": "large"}, "vm_memory": {"value": "4096Mi"}})), "p").unwrap();
    assert_eq!(ok.spec.memory.as_str(), "4096Mi");
    assert_eq!(ok.spec.memory, Quantity::parse("4Gi").unwrap());
}

#[test]
fn bad_templates_are_refused_with_every_problem() {
    let t: VirtualMachineTemplate = serde_json::from_value(json!({
        "id": "Bad Id",
        "parameters": [
            {"name": "a", "type": "integer", "default": {"value": "x"}},
            {"name": "a", "type": "bool"},
            {"name": "b"},
            {"name": "vm_memory", "type": "integer"},
            {"name": "c", "type": "string", "pattern": "("},
            {"name": "d", "type": "integer", "min": 5, "max": 1}
        ],
        "spec_defaults": {"memory": "1Mi", "readiness_probe": {"period_seconds": 1}}
    }))
    .unwrap();
    let errs = Template::compile(t).unwrap_err();
    let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
    for want in [
        "id",
        "parameters[0].default.value",
        "parameters[1].name",
        "parameters[2].type",
        "parameters[3].type",
        "parameters[4].pattern",
        "parameters[5].min",
        "spec_defaults.readiness_probe",
        "spec_defaults.memory",
    ] {
        assert!(fields.contains(&want), "missing {want} in {fields:?}");
    }
}

#[test]
fn unknown_fields_are_refused_by_name() {
    let err = serde_json::from_value::<VirtualMachineSpec>(json!({"template": "t", "template_parameter": {}})).unwrap_err();
    assert!(err.to_string().contains("template_parameter"), "{err}");
    let err = serde_json::from_value::<VirtualMachineSpec>(json!({"template": "t", "template_parameters": {"x": 4}})).unwrap_err();
    assert!(err.to_string().contains("ParameterValue") || err.to_string().contains("map"), "{err}");
}

#[test]
fn vm_serialises_in_the_seed_shape() {
    let now = chrono::Utc::now();
    let vm = VirtualMachine {
        type_url: vm::VM_TYPE_URL.into(),
        id: "fecb9b9e-07ac-4d56-8b48-9d50aab71677".into(),
        metadata: Metadata::new("myvm", "guest", (now, None), &["guest".into()], 1, &Labels::default()),
        spec: VirtualMachineSpec {
            template_parameters: params(json!({"vm_memory": {"value": "4Gi"}})),
            ..VirtualMachineSpec::new("simple_vm")
        },
        status: {
            let mut o = Observation::new(Phase::Ready);
            o.internal_ip = Some("10.0.0.1".into());
            o.external_ip = Some("193.1.2.3".into());
            derive_status(Desired::Power(PowerState::Started), &o, &VirtualMachineStatus::default(), now)
        },
    };
    let v = serde_json::to_value(&vm).unwrap();
    assert_eq!(v["@type"], "type.googleapis.com/fulfillment.v1.VirtualMachine");
    assert_eq!(v["status"]["state"], "VIRTUAL_MACHINE_STATE_READY");
    assert_eq!(v["status"]["internalIP"], "10.0.0.1");
    assert_eq!(v["status"]["externalIP"], "193.1.2.3");
    assert_eq!(v["status"]["conditions"][1]["type"], "VIRTUAL_MACHINE_CONDITION_TYPE_READY");
    assert_eq!(v["status"]["conditions"][1]["status"], "CONDITION_STATUS_TRUE");
    assert_eq!(v["spec"]["template_parameters"]["vm_memory"]["value"], "4Gi");
    let back: VirtualMachine = serde_json::from_value(v).unwrap();
    assert_eq!(back, vm);
}

#[test]
fn text_values_follow_the_declared_type() {
    let t = Template::compile(seed_template()).unwrap();
    assert_eq!(t.value_from_text("vm_cpu_cores", "4").unwrap(), json!(4));
    assert_eq!(t.value_from_text("vm_memory", "4Gi").unwrap(), json!("4Gi"));
    assert!(t.value_from_text("vm_cpu_cores", "four").unwrap_err().to_string().contains("expected an integer"));
    assert!(t.value_from_text("nope", "1").unwrap_err().to_string().contains("valid parameters are"));
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-zA-Z0-9.]{0,8}".prop_map(serde_json::Value::from),
        (0u32..5000, prop::sample::select(vec!["Ki", "Mi", "Gi", "G", ""])).prop_map(|(n, s)| serde_json::Value::from(format!("{n}{s}"))),
        prop::collection::vec("[a-z]{0,4}", 0..4).prop_map(serde_json::Value::from),
    ]
}

proptest! {
    /// Whatever a tenant sends, validation either accepts it with a spec that
    /// respects the constraints, or names the field of every bad value.
    #[test]
    fn validation_is_total_and_names_fields(
        cores in arb_json(), mem in arb_json(), extra in prop::option::of(arb_json()),
    ) {
        let t: VirtualMachineTemplate = serde_json::from_value(json!({
            "id": "p",
            "parameters": [
                {"name": "vm_cpu_cores", "min": 1, "max": 64, "default": {"value": 1}},
                {"name": "vm_memory", "min": "64Mi", "max": "64Gi", "default": {"value": "1Gi"}}
            ]
        })).unwrap();
        let t = Template::compile(t).unwrap();
        let mut given = BTreeMap::new();
        given.insert("vm_cpu_cores".to_string(), ParameterValue::new(cores));
        given.insert("vm_memory".to_string(), ParameterValue::new(mem));
        if let Some(e) = extra { given.insert("zz_extra".to_string(), ParameterValue::new(e)); }
        match t.resolve(&given, "spec.template_parameters") {
            Ok(r) => {
                prop_assert!((1..=64).contains(&r.spec.cpu.cores));
                prop_assert!(r.spec.memory_bytes() >= 64 << 20 && r.spec.memory_bytes() <= 64 << 30);
                prop_assert!(!given.contains_key("zz_extra"));
            }
            Err(errs) => {
                prop_assert!(!errs.is_empty());
                for e in errs.iter() {
                    prop_assert!(e.field.starts_with("spec.template_parameters."), "{}", e);
                    prop_assert!(!e.reason.is_empty());
                }
                if given.contains_key("zz_extra") {
                    prop_assert!(errs.iter().any(|e| e.field == "spec.template_parameters.zz_extra"));
                }
            }
        }
    }
}

#[test]
fn osac_type_urls_name_parameter_types() {
    let wire: VirtualMachineTemplate = serde_json::from_value(json!({
        "id": "osac", "parameters": [
            {"name": "vm_cpu_cores", "type": "type.googleapis.com/google.protobuf.Int32Value"},
            {"name": "vm_memory", "type": "type.googleapis.com/google.protobuf.StringValue"},
            {"name": "label", "type": "type.googleapis.com/google.protobuf.StringValue"},
            {"name": "debug", "type": "type.googleapis.com/google.protobuf.BoolValue"},
            {"name": "tags", "type": "type.googleapis.com/google.protobuf.ListValue"}]
    }))
    .unwrap();
    let t = Template::compile(wire).unwrap();
    let kinds: Vec<_> = t.parameters().iter().map(|p| p.kind.parameter_type()).collect();
    let want = [ParameterType::Integer, ParameterType::Quantity, ParameterType::String, ParameterType::Bool, ParameterType::List];
    assert_eq!(kinds, want);
    let bad = serde_json::from_value::<VirtualMachineTemplate>(
        json!({"id": "x", "parameters": [{"name": "a", "type": "type.googleapis.com/google.protobuf.Duration"}]}),
    );
    assert!(bad.is_err());
}

#[test]
fn a_template_name_must_be_its_id() {
    let named = |name: &str| serde_json::from_value::<VirtualMachineTemplate>(json!({"id": "small", "metadata": {"name": name}})).unwrap();
    assert!(Template::compile(named("small")).is_ok());
    let errs = Template::compile(named("large")).err().unwrap();
    assert_eq!(errs.0[0].field, "metadata.name");
    assert!(errs.0[0].reason.contains("named by its id"), "{}", errs.0[0].reason);
}
