//! Property tests that fuzz what the API decodes and compiles: random bytes,
//! random JSON trees and mutated valid bodies never panic, and every
//! refusal is a 400 (or 413/408) naming a field. Bounded: a fixed number of
//! cases per property.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};
use vmaas_model::{
    CreateVirtualMachine, CreateVirtualNetwork, Envelope, ParameterValue, PatchVirtualMachine, Template, VirtualMachineTemplate,
};

use crate::decode::decode;
use crate::error::ApiError;

fn cases() -> ProptestConfig {
    ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() }
}

/// Any JSON tree of bounded size.
fn json_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "[a-zA-Z0-9_ .:/@-]{0,12}".prop_map(Value::String),
        prop_oneof![Just("2Gi"), Just("-1"), Just("100Ti"), Just("1e400"), Just("tiny"), Just("started"), Just("")].prop_map(|s| json!(s)),
    ];
    let keys = prop_oneof![
        Just("object"),
        Just("metadata"),
        Just("name"),
        Just("spec"),
        Just("template"),
        Just("template_parameters"),
        Just("value"),
        Just("state"),
        Just("id"),
        Just("version"),
        Just("ipv4_cidr"),
        Just("parameters"),
        Just("default"),
        Just("type"),
        Just("min"),
        Just("max"),
        Just("@type"),
        Just("x")
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone().prop_map(str::to_owned), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A refusal as the API promises it: a client error naming a field.
fn names_a_field(e: &ApiError) -> Result<(), TestCaseError> {
    prop_assert!(e.status.is_client_error(), "{e:?}");
    prop_assert!(!e.details.is_empty() && e.details.iter().all(|d| !d.field.is_empty() && !d.field.contains('?')), "{e:?}");
    Ok(())
}

fn every_body(bytes: &[u8]) -> Result<(), TestCaseError> {
    for r in [
        decode::<Envelope<CreateVirtualMachine>>(bytes).err(),
        decode::<Envelope<PatchVirtualMachine>>(bytes).err(),
        decode::<Envelope<VirtualMachineTemplate>>(bytes).err(),
        decode::<Envelope<CreateVirtualNetwork>>(bytes).err(),
    ]
    .into_iter()
    .flatten()
    {
        names_a_field(&r)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn random_bytes_are_refused_with_a_field(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        every_body(&bytes)?;
    }

    #[test]
    fn random_json_is_refused_with_a_field_or_accepted(v in json_tree()) {
        every_body(v.to_string().as_bytes())?;
        every_body(json!({"object": v}).to_string().as_bytes())?;
    }

    #[test]
    fn a_valid_body_cut_or_extended_is_refused_with_a_field(cut in 0usize..90, tail in "[ a-z{}\\[\\],:\"0-9]{0,8}") {
        let body = json!({"object": {"metadata": {"name": "web"}, "spec": {"template": "tiny", "template_parameters": {"vm_memory": {"value": "1Gi"}}}}}).to_string();
        let mut bytes = body.as_bytes()[..cut.min(body.len())].to_vec();
        bytes.extend_from_slice(tail.as_bytes());
        every_body(&bytes)?;
    }

    #[test]
    fn any_template_compiles_or_names_a_field_and_resolves_without_panicking(
        params in prop::collection::vec((
            prop_oneof![Just("vm_cpu_cores"), Just("vm_memory"), Just("vm_disk_size"), Just("vm_ssh_keys"), Just("custom"), Just("Bad Name")],
            prop_oneof![Just(None), Just(Some("integer")), Just(Some("quantity")), Just(Some("string")), Just(Some("list")), Just(Some("bogus"))],
            json_tree(), json_tree(), json_tree()), 0..4),
        given in prop::collection::btree_map(prop_oneof![Just("vm_cpu_cores"), Just("vm_memory"), Just("custom"), Just("nope")], json_tree(), 0..3),
    ) {
        let parameters: Vec<Value> = params.iter().map(|(name, ty, min, max, default)| {
            let mut p = json!({"name": name, "min": min, "max": max, "default": {"value": default}});
            if let Some(t) = ty {
                p["type"] = json!(t);
            }
            p
        }).collect();
        let body = json!({"object": {"id": "fuzzed", "parameters": parameters}}).to_string();
        let wire = match decode::<Envelope<VirtualMachineTemplate>>(body.as_bytes()) {
            Ok(w) => w.object,
            Err(e) => return names_a_field(&e),
        };
        let template = match Template::compile(wire) {
            Ok(t) => t,
            Err(errs) => {
                prop_assert!(!errs.0.is_empty() && errs.0.iter().all(|e| !e.field.is_empty()));
                return Ok(());
            }
        };
        let given: BTreeMap<String, ParameterValue> =
            given.into_iter().filter_map(|(k, v)| Some((k.to_owned(), serde_json::from_value(json!({"value": v})).ok()?))).collect();
        if let Err(errs) = template.resolve(&given, "object.spec.template_parameters") {
            prop_assert!(errs.0.iter().all(|e| e.field.starts_with("object.spec.template_parameters")), "{errs:?}");
        }
    }
}
